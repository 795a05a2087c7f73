# Calls in a hot loop: s = sum of f(i) for i below 1000000, where
# f(x) = (x * x + 3 * x) % 1000 + g(x) and g(x) = x // 7. The Python peer of calls.vm (same
# algorithm, same output); `main()` is what the bench times.


def g(x):
    return x // 7


def f(x):
    return (x * x + x * 3) % 1000 + g(x)


def main():
    s = 0
    for i in range(1000000):
        s += f(i)
    print(s)


if __name__ == "__main__":
    main()
