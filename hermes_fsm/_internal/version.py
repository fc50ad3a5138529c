"""The package version (one place: the package root and recordings read it)."""

VERSION = "0.1.0"
