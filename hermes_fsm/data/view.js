/* hermes-fsm graph view: step through a recording's events. Reads the events from the
   JSON block in the page; fetches nothing. */
(function () {
  "use strict";
  var source = document.getElementById("hermes-events");
  var events = source ? JSON.parse(source.textContent) : [];
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr.step"));
  var states = Array.prototype.slice.call(document.querySelectorAll("svg.hermes-graph g.state"));
  var chainSource = document.getElementById("hermes-chains");
  var chains = chainSource ? JSON.parse(chainSource.textContent) : {};
  var chainBox = document.getElementById("chain");
  var payload = document.getElementById("payload");
  var title = document.getElementById("payload-title");
  var current = -1;

  function highlight(name) {
    states.forEach(function (g) {
      g.classList.toggle("active", name !== "" && g.getAttribute("data-state") === name);
    });
  }

  function select(position, scroll) {
    if (position < 0 || position >= rows.length) { return; }
    if (current >= 0) {
      rows[current].classList.remove("selected");
      rows[current].removeAttribute("aria-selected");
    }
    current = position;
    var row = rows[position];
    var event = events[Number(row.getAttribute("data-index"))];
    row.classList.add("selected");
    row.setAttribute("aria-selected", "true");
    title.textContent = "Payload of step " + event.seq + " (" + event.kind + ")";
    payload.textContent = JSON.stringify(event, null, 2);
    if (chainBox) {
      chainBox.textContent = chains[event.turn_id] || "No evidence chain for this turn.";
    }
    highlight(row.getAttribute("data-state") || "");
    if (scroll) { row.scrollIntoView({block: "nearest"}); row.focus({preventScroll: true}); }
  }

  rows.forEach(function (row, position) {
    row.addEventListener("click", function () { select(position, false); });
    row.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); select(position, false); }
    });
  });
  document.addEventListener("keydown", function (e) {
    if (e.target && (e.target.tagName === "INPUT" || e.target.tagName === "TEXTAREA")) { return; }
    if (e.key === "ArrowDown" || e.key === "j") { e.preventDefault(); select(current + 1, true); }
    if (e.key === "ArrowUp" || e.key === "k") { e.preventDefault(); select(Math.max(current - 1, 0), true); }
  });
  var prev = document.getElementById("prev");
  var next = document.getElementById("next");
  if (prev) { prev.addEventListener("click", function () { select(Math.max(current - 1, 0), true); }); }
  if (next) { next.addEventListener("click", function () { select(current + 1, true); }); }
  states.forEach(function (g) {
    g.addEventListener("click", function () {
      var name = g.getAttribute("data-state");
      for (var i = 1; i <= rows.length; i++) {
        var position = (current + i) % rows.length;
        if (rows[position].getAttribute("data-state") === name) { select(position, true); return; }
      }
      highlight(name);
    });
  });
  Array.prototype.slice.call(document.querySelectorAll("tr.turn")).forEach(function (row) {
    row.addEventListener("click", function () {
      var seq = row.getAttribute("data-seq");
      for (var i = 0; i < rows.length; i++) {
        if (rows[i].getAttribute("data-seq") === seq) { select(i, true); return; }
      }
    });
  });
}());
