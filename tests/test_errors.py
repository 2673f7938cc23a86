"""One-line renderings of an error: the first line (library errors), the whole message (bad input)."""

from __future__ import annotations

import tarfile

import pytest

from dpvip.errors import DpvipInputError, first_line, one_line


def test_a_colon_ended_first_line_keeps_the_reason_it_introduces(tmp_path):
    garbage = tmp_path / "garbage.tar"
    garbage.write_bytes(b"not a tar archive" * 100)
    with pytest.raises(tarfile.ReadError) as caught:
        tarfile.open(garbage)
    expected = (
        "file could not be opened successfully: - method gz: ReadError('not a gzip file'); "
        "- method bz2: ReadError('not a bzip2 file'); - method xz: ReadError('not an lzma file'); "
        "- method tar: ReadError('invalid header')"
    )
    assert first_line(caught.value) == one_line(caught.value) == expected


def test_one_line_keeps_every_line_and_first_line_only_the_first():
    err = DpvipInputError("config file x.yaml is wrong\n  at key a\n  at key b")
    assert one_line(err) == "config file x.yaml is wrong; at key a; at key b"
    assert first_line(err) == "config file x.yaml is wrong"
    assert one_line(DpvipInputError("")) == first_line(DpvipInputError("")) == "DpvipInputError"
