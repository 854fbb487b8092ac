"""The pure-Python CRC-32C that Docker and SSH nodes use when their Debian python3 lacks the C module."""
from __future__ import annotations

import os
import subprocess
import sys

import crc32c as c_module

from broker.kafka import records


def test_the_pure_crc_matches_the_check_value_and_the_c_module():
    assert records.crc32c_pure(b"123456789") == 0xE3069283      # CRC-32C's published check value
    assert records.crc32c_pure(b"") == 0
    for n in (1, 2, 3, 63, 64, 65, 1000, 65_537):
        data = os.urandom(n)
        assert records.crc32c_pure(data) == c_module.crc32c(data), n
        assert records.crc32c_pure(memoryview(data)) == c_module.crc32c(data), n


def test_a_broker_without_the_c_module_encodes_and_checks_batches_with_the_pure_one():
    # a fresh interpreter where `import crc32c` fails, as on a node image without python3-crc32c
    code = ("import sys; sys.modules['crc32c'] = None\n"
            "import broker.server.app\n"
            "from broker.kafka import records as r\n"
            "assert r._crc32c is r.crc32c_pure\n"
            "batch = r.encode_batch(5, 2, [(1000, None, b'v1'), (1001, None, b'v2')])\n"
            "[b] = r.decode_batches(batch)\n"
            "assert [x.value for x in b.records] == [b'v1', b'v2'] and b.partition_leader_epoch == 2\n"
            "bad = bytearray(batch); bad[-1] ^= 1\n"
            "try:\n    r.decode_batches(bytes(bad))\nexcept r.KafkaCodecError as e:\n    print('refused', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("refused") and "CRC" in out.stdout.upper(), out.stdout
