# N-body (floats + lists): the Jovian planets and the sun, 20000 steps of 0.01; prints the
# energy before and after (the benchmarks-game program). The Python peer of nbody.vm: same
# algorithm, float operations in the same order (so the same bits), same output; `main()` is
# what the bench times.
from math import sqrt

PI = 3.141592653589793
DAYS = 365.24
XS = []
YS = []
ZS = []
VXS = []
VYS = []
VZS = []
MS = []


def body(x, y, z, vx, vy, vz, m):
    """Adds a body: position, velocity (per day), mass (in solar masses)."""
    s = 4.0 * PI * PI
    XS.append(x)
    YS.append(y)
    ZS.append(z)
    VXS.append(vx * DAYS)
    VYS.append(vy * DAYS)
    VZS.append(vz * DAYS)
    MS.append(m * s)


def energy():
    e = 0.0
    for i in range(5):
        e = e + 0.5 * MS[i] * (VXS[i] * VXS[i] + VYS[i] * VYS[i] + VZS[i] * VZS[i])
        for j in range(i + 1, 5):
            dx = XS[i] - XS[j]
            dy = YS[i] - YS[j]
            dz = ZS[i] - ZS[j]
            e = e - MS[i] * MS[j] / sqrt(dx * dx + dy * dy + dz * dz)
    return e


def offset_momentum():
    """Moves the sun so that the total momentum is zero."""
    sm = 4.0 * PI * PI
    px = 0.0
    py = 0.0
    pz = 0.0
    for i in range(5):
        px = px + VXS[i] * MS[i]
        py = py + VYS[i] * MS[i]
        pz = pz + VZS[i] * MS[i]
    VXS[0] = (0.0 - px) / sm
    VYS[0] = (0.0 - py) / sm
    VZS[0] = (0.0 - pz) / sm


def advance(dt, steps):
    xs = XS
    ys = YS
    zs = ZS
    vxs = VXS
    vys = VYS
    vzs = VZS
    ms = MS
    for _ in range(steps):
        for i in range(5):
            for j in range(i + 1, 5):
                dx = xs[i] - xs[j]
                dy = ys[i] - ys[j]
                dz = zs[i] - zs[j]
                d2 = dx * dx + dy * dy + dz * dz
                mag = dt / (d2 * sqrt(d2))
                mi = ms[i] * mag
                mj = ms[j] * mag
                vxs[i] = vxs[i] - dx * mj
                vys[i] = vys[i] - dy * mj
                vzs[i] = vzs[i] - dz * mj
                vxs[j] = vxs[j] + dx * mi
                vys[j] = vys[j] + dy * mi
                vzs[j] = vzs[j] + dz * mi
        for i in range(5):
            xs[i] = xs[i] + dt * vxs[i]
            ys[i] = ys[i] + dt * vys[i]
            zs[i] = zs[i] + dt * vzs[i]


def main():
    # Fresh lists each run (the VM's globals start empty in every run).
    for lst in (XS, YS, ZS, VXS, VYS, VZS, MS):
        lst.clear()
    # sun
    body(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    # jupiter
    body(4.84143144246472090e+00, -1.16032004402742839e+00, -1.03622044471123109e-01,
         1.66007664274403694e-03, 7.69901118419740425e-03, -6.90460016972063023e-05,
         9.54791938424326609e-04)
    # saturn
    body(8.34336671824457987e+00, 4.12479856412430479e+00, -4.03523417114321381e-01,
         -2.76742510726862411e-03, 4.99852801234917238e-03, 2.30417297573763929e-05,
         2.85885980666130812e-04)
    # uranus
    body(1.28943695621391310e+01, -1.51111514016986312e+01, -2.23307578892655734e-01,
         2.96460137564761618e-03, 2.37847173959480950e-03, -2.96589568540237556e-05,
         4.36624404335156298e-05)
    # neptune
    body(1.53796971148509165e+01, -2.59193146099879641e+01, 1.79258772950371181e-01,
         2.68067772490389322e-03, 1.62824170038242295e-03, -9.51592254519715870e-05,
         5.15138902046611451e-05)
    offset_momentum()
    print(energy())
    advance(0.01, 20000)
    print(energy())


if __name__ == "__main__":
    main()
