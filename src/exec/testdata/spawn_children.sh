#!/bin/sh
# Leaves two children running in its process group and exits with code 3.
sleep 1000 &
echo $! >> "$1/children"
sleep 1000 &
echo $! >> "$1/children"
touch "$1/ready"
sleep 0.2
exit 3
