# Iterative Fibonacci: fib(68) computed 30000 times, folded into a checksum. The Python peer
# of fib.vm (same algorithm, same output); `main()` is what the bench times.


def fib(n):
    a = 0
    b = 1
    for _ in range(n):
        t = a + b
        a = b
        b = t
    return a


def main():
    x = 0
    for _ in range(30000):
        x = (x + fib(68)) % 1000000007
    print(x)
    print(fib(68))


if __name__ == "__main__":
    main()
