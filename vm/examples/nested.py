# Nested loops: s = sum of (i * j) % 7 for i, j below 1500. The Python peer of nested.vm
# (same algorithm, same output); `main()` is what the bench times.


def main():
    s = 0
    for i in range(1500):
        for j in range(1500):
            s += i * j % 7
    print(s)


if __name__ == "__main__":
    main()
