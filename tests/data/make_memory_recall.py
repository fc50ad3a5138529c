"""Writes memory_recall.jsonl: labelled (memories, query, expected) cases, English and Chinese.

Each fact has a statement, an older value (superseded in the "superseded" cases), and a
direct and a paraphrased query per language. A case's user holds every fact of its
language (the other facts are the distractors). Run: python tests/data/make_memory_recall.py
"""

import json
from pathlib import Path

# key, type, (en old, en new), (zh old, zh new), en statement, zh statement,
# en queries (direct, paraphrase), zh queries (direct, paraphrase)
FACTS = [
    ("preference.contact_channel", "preference", ("phone", "email"), ("电话", "邮件"),
     "Please contact me by {v}", "请用{v}联系我",
     ("how should you contact me", "what is the best way to reach me"),
     ("应该怎么联系我", "用什么方式找我最好")),
    ("profile.city", "fact", ("Shanghai", "Berlin"), ("上海", "北京"),
     "I live in {v}", "我住在{v}",
     ("which city do I live in", "where is my home"),
     ("我住在哪个城市", "我家在哪里")),
    ("profile.name", "fact", ("Bob", "Alice"), ("小李", "小王"),
     "My name is {v}", "我的名字是{v}",
     ("what is my name", "what should you call me"),
     ("我的名字是什么", "你应该怎么称呼我")),
    ("preference.language", "preference", ("French", "English"), ("英文", "中文"),
     "Please answer in {v}", "请用{v}回答我",
     ("which language should you answer in", "what language do I want replies in"),
     ("应该用什么语言回答", "我希望用哪种语言交流")),
    ("preference.coffee", "preference", ("latte", "espresso"), ("拿铁", "美式咖啡"),
     "My favourite coffee is {v}", "我最喜欢的咖啡是{v}",
     ("what coffee do I like", "which drink should you order for me at the cafe"),
     ("我喜欢什么咖啡", "去咖啡店应该给我点什么")),
    ("profile.job", "fact", ("teacher", "software engineer"), ("老师", "软件工程师"),
     "I work as a {v}", "我的工作是{v}",
     ("what is my job", "what do I do for a living"),
     ("我的工作是什么", "我是做什么职业的")),
    ("preference.diet", "preference", ("vegetarian", "vegan"), ("素食", "清真"),
     "My diet is {v}", "我的饮食是{v}",
     ("what is my diet", "what food restrictions do I have"),
     ("我的饮食习惯是什么", "我在吃的方面有什么忌口")),
    ("profile.birthday", "fact", ("May 3", "March 14"), ("五月三日", "三月十四日"),
     "My birthday is on {v}", "我的生日是{v}",
     ("when is my birthday", "what date was I born"),
     ("我的生日是哪天", "我是哪天出生的")),
    ("preference.meeting_time", "preference", ("afternoons", "mornings"), ("下午", "上午"),
     "I prefer meetings in the {v}", "我喜欢在{v}开会",
     ("when do I prefer meetings", "what time of day should you schedule my calls"),
     ("我喜欢什么时候开会", "会议安排在一天中的什么时间比较好")),
    ("profile.pet", "fact", ("a cat", "a dog named Rex"), ("一只猫", "一只叫旺财的狗"),
     "I have {v}", "我养了{v}",
     ("what pet do I have", "do I own any animals"),
     ("我养了什么宠物", "我家有动物吗")),
    ("progress.order_tracking", "progress", ("order 1001", "order 2002"),
     ("订单1001", "订单2002"),
     "I am waiting for {v} to arrive", "我在等{v}到货",
     ("which order am I waiting for", "what delivery am I expecting"),
     ("我在等哪个订单", "我在等什么快递")),
    ("preference.warehouse", "preference", ("west", "east"), ("华西仓", "华东仓"),
     "Always check the {v} warehouse first", "总是先查{v}",
     ("which warehouse should you check first", "where should stock lookups start"),
     ("应该先查哪个仓库", "查库存从哪里开始")),
    ("profile.company", "fact", ("Acme", "Globex"), ("阿里", "腾讯"),
     "I work at {v}", "我在{v}上班",
     ("which company do I work for", "who is my employer"),
     ("我在哪家公司上班", "我的雇主是谁")),
    ("preference.units", "preference", ("imperial", "metric"), ("英制", "公制"),
     "Use {v} units for measurements", "测量请用{v}单位",
     ("which measurement units do I use", "should distances be in miles or kilometres"),
     ("我用什么计量单位", "距离用英里还是公里")),
    ("profile.team", "fact", ("sales", "logistics"), ("销售部", "物流部"),
     "I am on the {v} team", "我在{v}工作",
     ("which team am I on", "what department do I belong to"),
     ("我在哪个部门", "我属于哪个团队")),
    ("preference.notifications", "preference", ("daily", "weekly"), ("每天", "每周"),
     "Send me a summary {v}", "请{v}给我发一次总结",
     ("how often should you send summaries", "how frequently do I want reports"),
     ("多久给我发一次总结", "报告的频率是多少")),
    ("profile.timezone", "fact", ("UTC", "Asia/Shanghai"), ("伦敦时间", "北京时间"),
     "My timezone is {v}", "我的时区是{v}",
     ("what is my timezone", "what time zone am I in for scheduling"),
     ("我的时区是什么", "安排时间按哪个时区")),
    ("preference.music", "preference", ("jazz", "classical music"), ("爵士乐", "古典音乐"),
     "I enjoy listening to {v}", "我喜欢听{v}",
     ("what music do I like", "what should you play for me"),
     ("我喜欢听什么音乐", "应该给我放什么歌")),
    ("profile.car", "fact", ("a Toyota", "a Tesla"), ("丰田", "特斯拉"),
     "I drive {v}", "我开的车是{v}",
     ("what car do I drive", "which vehicle do I own"),
     ("我开什么车", "我的汽车是什么牌子")),
    ("correction.sku_name", "correction", ("keyboard", "wireless mouse"), ("键盘", "无线鼠标"),
     "Note that A1001 is a {v}", "注意A1001是{v}",
     ("what product is A1001", "what is item A1001 called"),
     ("A1001是什么产品", "A1001这个商品叫什么")),
    ("preference.seat", "preference", ("aisle", "window"), ("过道", "靠窗"),
     "I like a {v} seat when flying", "坐飞机我喜欢{v}的座位",
     ("which seat do I like on flights", "where should you book my airplane seat"),
     ("坐飞机我喜欢什么座位", "订机票时选哪个位置")),
    ("profile.allergy", "fact", ("pollen", "peanuts"), ("花粉", "花生"),
     "I am allergic to {v}", "我对{v}过敏",
     ("what am I allergic to", "which foods are dangerous for me"),
     ("我对什么过敏", "哪些食物对我有危险")),
    ("progress.project", "progress", ("the website redesign", "the Q3 inventory audit"),
     ("网站改版", "三季度库存盘点"),
     "I am currently working on {v}", "我现在在做{v}",
     ("what project am I working on", "what task is in progress"),
     ("我现在在做什么项目", "手头正在进行的任务是什么")),
    ("preference.payment", "preference", ("credit card", "bank transfer"), ("信用卡", "支付宝"),
     "I pay by {v}", "我用{v}付款",
     ("how do I pay", "which payment method should you use for my orders"),
     ("我用什么付款", "订单用哪种支付方式")),
    ("profile.kids", "fact", ("one daughter", "two sons"), ("一个女儿", "两个儿子"),
     "I have {v}", "我有{v}",
     ("how many children do I have", "tell me about my kids"),
     ("我有几个孩子", "说说我的孩子")),
]


def cases():
    out = []
    for lang in ("en", "zh"):
        for superseded in (False, True):
            user = f"{lang}-{'sup' if superseded else 'plain'}"
            memories = []
            for key, mtype, en, zh, en_s, zh_s, _, _ in FACTS:
                old, new = en if lang == "en" else zh
                statement = en_s if lang == "en" else zh_s
                if superseded:
                    memories.append({"key": key, "type": mtype, "value": old,
                                     "text": statement.format(v=old)})
                memories.append({"key": key, "type": mtype, "value": new,
                                 "text": statement.format(v=new)})
            for key, _, en, zh, _, _, en_q, zh_q in FACTS:
                new = (en if lang == "en" else zh)[1]
                old = (en if lang == "en" else zh)[0]
                for kind, query in zip(("direct", "paraphrase"),
                                       en_q if lang == "en" else zh_q, strict=True):
                    out.append({"id": f"{user}-{key}-{kind}", "lang": lang, "user": user,
                                "kind": kind, "superseded": superseded, "query": query,
                                "expected": {"key": key, "value": new},
                                "never": {"key": key, "value": old} if superseded else None,
                                "memories": memories})
    return out


if __name__ == "__main__":
    path = Path(__file__).with_name("memory_recall.jsonl")
    rows = cases()
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    print(f"wrote {len(rows)} cases to {path}")
