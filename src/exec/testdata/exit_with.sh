#!/bin/sh
# Writes one line to each stream, then exits with the code given.
echo "out $1"
echo "err $1" >&2
exit "$1"
