#!/usr/bin/env python3
"""Writes N order-like JSON records (~205 bytes each, one per line) for bench/stdout_vs_kcat.sh.

    gen_records.py N OUT_FILE [SEED]

Deterministic for a given seed; values vary per record (ids, customers, amounts, currencies,
timestamps, item lists, nested address) so the payloads are not one repeated string.
"""
import random
import sys


def main() -> None:
    n = int(sys.argv[1])
    out = sys.argv[2]
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 42)
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
