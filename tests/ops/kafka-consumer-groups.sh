#!/usr/bin/env bash
# Kafka's own kafka-consumer-groups tool, run from the broker jars the tests use (tools/kafka/libs,
# or PICOMQ_KAFKA_LIBS): what an operator would check offsets with.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
libs="${PICOMQ_KAFKA_LIBS:-$repo/tools/kafka/libs}"
exec java -Xmx256m -Dlog4j2.level=ERROR -cp "$libs/*" org.apache.kafka.tools.consumer.group.ConsumerGroupCommand "$@"
