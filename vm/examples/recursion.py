# Recursive calls: fib(N) by the doubly recursive definition, and the number of calls it
# made (counted by a second recursive function of the same shape). The Python peer of
# recursion.vm (same algorithm, same output); `main()` is what the bench times.
N = 20


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def calls(n):
    if n < 2:
        return 1
    return calls(n - 1) + calls(n - 2) + 1


def main():
    print(fib(N))
    print(calls(N))


if __name__ == "__main__":
    main()
