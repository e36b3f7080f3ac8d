import sys

sys.stdin.read()
print("async session hook ran (fixture 2a9c)")
