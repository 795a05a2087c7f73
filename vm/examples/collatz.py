# Collatz (branchy): total steps, longest chain and its start, for starts below 100000. The
# Python peer of collatz.vm (same algorithm, same output); `main()` is what the bench times.


def main():
    total = 0
    best = 0
    bestn = 0
    for n in range(1, 100000):
        x = n
        steps = 0
        while x != 1:
            if x % 2 == 0:
                x = x // 2
            else:
                x = x * 3 + 1
            steps += 1
        total += steps
        if steps > best:
            best = steps
            bestn = n
    print(total, best, bestn)


if __name__ == "__main__":
    main()
