import sys

sys.stdin.read()
print("prompt hook: current sprint is 42 (fixture 9d1e)")
