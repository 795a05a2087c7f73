# Sieve of Eratosthenes (lists): the number of primes below N, and the last one. The Python
# peer of sieve.vm (same algorithm, same output); `main()` is what the bench times.
N = 2000000


def main():
    flags = [True] * N
    i = 2
    while i * i < N:
        if flags[i]:
            for j in range(i * i, N, i):
                flags[j] = False
        i += 1
    count = 0
    last = None
    for i in range(2, N):
        if flags[i]:
            count += 1
            last = i
    print(count, last)


if __name__ == "__main__":
    main()
