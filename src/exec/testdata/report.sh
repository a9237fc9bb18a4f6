#!/bin/sh
# Prints what the job was given: environment, directory, CPUs and user.
echo "foo=$FOO"
echo "leak=$GPUHERD_LEAK_CHECK"
echo "cwd=$(pwd)"
echo "cpus=$(grep Cpus_allowed_list /proc/self/status | cut -f2)"
echo "uid=$(id -u) gid=$(id -g)"
