# Integer loop sum: s = 0 + 1 + ... + (N - 1). The Python peer of sum.vm (same algorithm,
# same output); `main()` is what the bench times (bench/python/timed_main.py).
N = 3000000


def main():
    s = 0
    for i in range(N):
        s += i
    print(s)


if __name__ == "__main__":
    main()
