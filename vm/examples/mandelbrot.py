# Mandelbrot (floats): points of a 120 x 48 grid inside the set (1000 iterations), per row.
# The Python peer of mandelbrot.vm (same algorithm and float operations in the same order,
# same output); `main()` is what the bench times.


def main():
    inside = 0
    for y in range(48):
        rowc = 0
        ci = float(y) * 2.4 / 48.0 + -1.2
        for x in range(120):
            cr = float(x) * 2.8 / 120.0 + -2.0
            zr = 0.0
            zi = 0.0
            zr2 = 0.0
            zi2 = 0.0
            it = 0
            while it < 1000:
                if not zr2 + zi2 <= 4.0:
                    break
                zi = zr * zi * 2.0 + ci
                zr = zr2 - zi2 + cr
                zr2 = zr * zr
                zi2 = zi * zi
                it += 1
            else:
                rowc += 1
        print(y, rowc)
        inside += rowc
    print(inside)


if __name__ == "__main__":
    main()
