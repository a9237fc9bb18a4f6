#!/bin/sh
# Records its pid, then runs until $1/go exists and exits with code 7.
# SIGUSR1 is noted in $1/events.
trap 'echo usr1 >> "$1/events"' USR1
echo $$ > "$1/pid.tmp" && mv "$1/pid.tmp" "$1/pid"
while [ ! -e "$1/go" ]; do sleep 0.02; done
exit 7
