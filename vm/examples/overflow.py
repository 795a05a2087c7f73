# Errors are reported with their location: the sum of cubes overflows the 48-bit int range
# of the VM (Python would switch to big ints, so this program checks every result the VM
# checks, at the same operations) after 4000 rounds. The Python peer of overflow.vm (same
# algorithm, same output); the error message names the operation's place in overflow.vm, so
# both print the same text. `main()` is what the bench times; an exception it raises is
# printed as `error: <message>`, as the VM's runners do.
INT_MIN = -(1 << 47)
INT_MAX = (1 << 47) - 1


def int48(value, where):
    """`value`, or OverflowError (located at `where`, a line:column of overflow.vm)."""
    if value < INT_MIN or value > INT_MAX:
        raise OverflowError(
            f"line {where} in main: OverflowError: int result outside the 48-bit range"
        )
    return value


def main():
    i = 0
    s = 0
    while True:
        if i % 1000 == 0:
            print(i, s)
        s = int48(s + int48(int48(i * i, "13:27") * i, "13:40"), "13:45")
        i = int48(i + 1, "14:20")


if __name__ == "__main__":
    try:
        main()
    except OverflowError as e:
        print(f"error: {e}")
