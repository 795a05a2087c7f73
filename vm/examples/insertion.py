# Branchy list code: N pseudo-random ints (x = (75 * x + 74) % 65537) sorted by insertion
# sort, whose inner loop stops on a data-dependent compare; then one pass that branches three
# ways on each item's remainder by 3. Prints a checksum of the sorted list, its ends and the
# three counts. The Python peer of insertion.vm (same algorithm, same output); `main()` is
# what the bench times.
N = 1500


def main():
    xs = [0] * N
    x = 1
    for i in range(N):
        x = (75 * x + 74) % 65537
        xs[i] = x
    for i in range(1, N):
        v = xs[i]
        j = i - 1
        while j >= 0 and xs[j] > v:
            xs[j + 1] = xs[j]
            j = j - 1
        xs[j + 1] = v
    total = 0
    a = 0
    b = 0
    c = 0
    for i in range(N):
        v = xs[i]
        total = (total + i * v) % 1000000007
        if v % 3 == 0:
            a = a + 1
        elif v % 3 == 1:
            b = b + v
        else:
            c = c + v // 3
    print(total)
    print(xs[0], xs[N - 1])
    print(a, b, c)


if __name__ == "__main__":
    main()
