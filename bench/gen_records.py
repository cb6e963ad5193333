#!/usr/bin/env python3
"""Writes N JSON records (one per line) for the Kafka benchmarks (bench/*.sh).

    gen_records.py N OUT_FILE [SEED] [--shape orders|small|wide]

Shapes (the default, orders, is what stdout_vs_kcat.sh and planes.sh always used; its output
for a given N and seed is unchanged):
  orders  order-like objects, ~207 bytes: ids, customers, amounts, currencies, timestamps, item
          lists, nested address; values vary per record so the payloads are not one repeated string
  small   ~51 bytes: {"id":..,"v":..,"ok":..,"ts":..}; per-record overhead dominates
  wide    ~930 bytes: ids, amounts, a 40-field attribute object and a free-text note

Deterministic for a given seed and shape.
"""
import random
import sys

SHAPES = ("orders", "small", "wide")


def main() -> None:
    args = sys.argv[1:]
    shape = "orders"
    if "--shape" in args:
        i = args.index("--shape")
        shape = args[i + 1]
        del args[i:i + 2]
    if shape not in SHAPES:
        sys.exit(f"gen_records.py: unknown shape {shape!r} (one of {', '.join(SHAPES)})")
    n = int(args[0])
    out = args[1]
    seed = int(args[2]) if len(args) > 2 else 42
    if shape == "orders":
        orders(n, out, random.Random(seed))
    else:
        other(n, out, random.Random(seed), shape)


def write_all(out, n, make):
    total = 0
    with open(out, "w", buffering=1 << 20) as f:
        lines = []
        for i in range(n):
            line = make(i)
            total += len(line)
            lines.append(line)
            if len(lines) == 10000:
                f.write("\n".join(lines) + "\n")
                lines.clear()
        if lines:
            f.write("\n".join(lines) + "\n")
    print(f"{n} records, {total} payload bytes, {total / max(n, 1):.1f} bytes/record avg")


def other(n, out, rng, shape):
    base_ts = 1_735_689_600_000
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett",
             "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"]

    def small(i):
        return (f'{{"id":{i},"v":{rng.randrange(1, 1_000_000_000)},"ok":{"true" if rng.random() < 0.5 else "false"},'
                f'"ts":{base_ts + i * 37 + rng.randrange(37)}}}')

    def wide(i):
        attrs = ",".join(f'"a{k:02d}":{rng.randrange(100000)}' if k % 2 else f'"a{k:02d}":"{words[rng.randrange(20)]}"'
                         for k in range(40))
        note = " ".join(words[rng.randrange(20)] for _ in range(rng.randint(40, 60)))
        return (f'{{"id":"w-{i:09d}","customer":{rng.randrange(1, 10_000_000)},'
                f'"amount":{rng.randrange(100, 10_000_000) / 100:.2f},"attrs":{{{attrs}}},"note":"{note}",'
                f'"ts":{base_ts + i * 37 + rng.randrange(37)}}}')

    write_all(out, n, small if shape == "small" else wide)


def orders(n, out, rng) -> None:
    regions = ["eu", "us", "apac", "latam"]
    currencies = ["EUR", "USD", "GBP", "JPY", "BRL", "CHF"]
    statuses = ["created", "paid", "shipped", "delivered", "cancelled", "refunded"]
    channels = ["web", "ios", "android", "store", "partner"]
    cities = ["Berlin", "Lyon", "Austin", "Osaka", "Recife", "Zurich", "Leeds", "Porto", "Denver", "Pune"]
    skus = [f"SKU-{i:05d}" for i in range(5000)]
    base_ts = 1_735_689_600_000  # 2025-01-01T00:00:00Z
    total = 0
    with open(out, "w", buffering=1 << 20) as f:
        lines = []
        for i in range(n):
            region = regions[i % 4]
            items = rng.randint(1, 2)
            sku_list = ",".join('"' + skus[rng.randrange(5000)] + '"' for _ in range(items))
            line = (
                f'{{"id":"{region}-{i:09d}","customer":{rng.randrange(1, 10_000_000)},'
                f'"status":"{statuses[rng.randrange(6)]}","channel":"{channels[rng.randrange(5)]}",'
                f'"amount":{rng.randrange(100, 10_000_000) / 100:.2f},"ccy":"{currencies[rng.randrange(6)]}",'
                f'"items":[{sku_list}],"qty":{rng.randint(1, 20)},'
                f'"ship_to":{{"city":"{cities[rng.randrange(10)]}"}},'
                f'"express":{"true" if rng.random() < 0.2 else "false"},"ts":{base_ts + i * 37 + rng.randrange(37)}}}'
            )
            total += len(line)
            lines.append(line)
            if len(lines) == 10000:
                f.write("\n".join(lines) + "\n")
                lines.clear()
        if lines:
            f.write("\n".join(lines) + "\n")
    print(f"{n} records, {total} payload bytes, {total / max(n, 1):.1f} bytes/record avg")


if __name__ == "__main__":
    main()
