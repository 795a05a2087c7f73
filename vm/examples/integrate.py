# Float kernel with calls: the midpoint rule in N steps for the integrals over [0, 1] of
# f(x) = 4 / (1 + x * x) (pi) and g(x) = x * sqrt(x) (0.4); f and g are called in the loop.
# The Python peer of integrate.vm (same algorithm, float operations in the same order, same
# output); `main()` is what the bench times.
from math import sqrt

N = 200000


def f(x):
    return 4.0 / (1.0 + x * x)


def g(x):
    return x * sqrt(x)


def main():
    h = 1.0 / float(N)
    s = 0.0
    t = 0.0
    for i in range(N):
        x = (float(i) + 0.5) * h
        s = s + f(x)
        t = t + g(x)
    print(s * h)
    print(t * h)


if __name__ == "__main__":
    main()
