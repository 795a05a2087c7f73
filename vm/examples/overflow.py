# Ints beyond the tagged range: the sum of cubes leaves the VM's 48-bit tagged range (where
# the VM's ints become big ints, as Python's always are), then the same cubes are subtracted
# and it comes back. The Python peer of overflow.vm (same algorithm, same output); the last
# division is by zero, and its error names the place in overflow.vm, so that both print the
# same text. `main()` is what the bench times; an exception it raises is printed as
# `error: <message>`, as the VM's runners do.


def main():
    i = 0
    s = 0
    while i < 6000:
        if i % 1000 == 0:
            print(i, s)
        s = s + i * i * i
        i = i + 1
    while i > 0:
        i = i - 1
        s = s - i * i * i
        if i % 1000 == 0:
            print(i, s)
    if i == 0:
        raise ZeroDivisionError("line 26:19 in main: ZeroDivisionError: division by zero")
    print(s // i)


if __name__ == "__main__":
    try:
        main()
    except ZeroDivisionError as e:
        print(f"error: {e}")
