#!/bin/sh
# Follows the job protocol: SIGUSR1 = checkpoint and go on, SIGTERM =
# checkpoint and exit. Each event is appended to $1/events.
trap 'echo checkpoint >> "$1/events"' USR1
trap 'echo stopping >> "$1/events"; exit 0' TERM
touch "$1/ready"
while true; do sleep 0.05; done
