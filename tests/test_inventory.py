"""The host inventory (issue 25): both formats, ozone-site.xml as Hadoop reads it, every
refusal of a hostile or ambiguous file, and the plain-list round trip.

The golden files were written by Ozone's own Java (tests/data/ozone-golden/datanode-list/); the
expected hosts below are typed in from its README.md and the files' text, not taken from the parser.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from hypothesis import given, settings, strategies as st

from merkle.replica.errors import ReplicaError
from merkle.replica.inventory import (
    DATANODE_LIST,
    HOST_LIST,
    MAX_HOSTS,
    MAX_INVENTORY_BYTES,
    MAX_OZONE_SITE_BYTES,
    MAX_VOLUMES_PER_HOST,
    Host,
    Inventory,
    InventoryError,
    _NoDoctype,
    inventory_json,
    load_inventory,
    parse_inventory,
    read_datanode_dirs,
)

#: The repository's copy of ../shared/ozone-golden (test_ozone_golden checks it is the same).
GOLDEN = Path(__file__).resolve().parent / "data" / "ozone-golden" / "datanode-list"

DN1 = "2b5b5a0e-5a8b-4d0c-9d8e-0f1a2b3c4d01"
DN2 = "7c0f7e2a-1b2c-4d3e-8f90-a1b2c3d4e502"
DN3 = "c3d4e5f6-0718-4293-a4b5-c6d7e8f90a03"
VOLS = ["/data/disk1", "/data/disk2"]

# (host, address, uuid, opState, healthState, failedVolumes) in file order: typed from the
# datanode-list/README.md ("dn2 DEAD while in maintenance, dn3 with one failed volume; sorted
# HEALTHY first";
# "--most-used ... dn2 HEALTHY with a failed volume") and the files' text.
EXAMPLE1 = [
    ("ozone-dn1.example.com", "10.0.0.11", DN1, "IN_SERVICE", "HEALTHY", ()),
    (
        "ozone-dn3.example.com",
        "10.0.0.13",
        DN3,
        "DECOMMISSIONING",
        "HEALTHY",
        ("/data/disk3/hdds",),
    ),
    ("ozone-dn2.example.com", "10.0.0.12", DN2, "IN_MAINTENANCE", "DEAD", ()),
]
EXAMPLE2 = [
    ("ozone-dn1.example.com", "10.0.0.11", DN1, "IN_SERVICE", "HEALTHY", ()),
    ("ozone-dn3.example.com", "10.0.0.13", DN3, "DECOMMISSIONING", "HEALTHY", ()),
    ("ozone-dn2.example.com", "10.0.0.12", DN2, "IN_MAINTENANCE", "HEALTHY", ("/data/disk2/hdds",)),
]


def site(tmp_path: Path, body: str, name: str = "ozone-site.xml") -> str:
    p = tmp_path / name
    p.write_text(f'<?xml version="1.0"?>\n<configuration>\n{body}\n</configuration>\n')
    return str(p)


def prop(name: str, value: str, final: bool = False) -> str:
    f = "<final>true</final>" if final else ""
    return f"<property><name>{name}</name><value>{value}</value>{f}</property>"


def dirs_of(tmp_path: Path, value: str) -> List[str]:
    return read_datanode_dirs(site(tmp_path, prop("hdds.datanode.dir", value)))


def refused(text: str, *, defaults: Any = VOLS, match: Optional[str] = None) -> str:
    """The one-line InventoryError parse_inventory raises for `text`."""
    with pytest.raises(InventoryError, match=match) as info:
        parse_inventory(text, defaults, where="inv.json")
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("inv.json: "), msg
    return msg


def plain(*entries: Dict[str, Any]) -> str:
    return json.dumps(list(entries))


# ---- ozone admin datanode list --json ------------------------------------------------------


@pytest.mark.parametrize(
    "name, expected",
    [("example1-list-json.json", EXAMPLE1), ("example2-list-json-most-used.json", EXAMPLE2)],
)
def test_golden_datanode_list(tmp_path: Path, name: str, expected: list) -> None:
    path = GOLDEN / name
    # the oracle: the file itself says what the typed-in table says
    raw = json.loads(path.read_text())
    assert [
        (
            e["hostName"],
            e["ipAddress"],
            e["id"],
            e["opState"],
            e["healthState"],
            tuple(e.get("failedVolumes", ())),
        )
        for e in raw
    ] == expected

    conf = site(tmp_path, prop("hdds.datanode.dir", "/data/disk1,/data/disk2,/data/disk3"))
    inv = load_inventory(str(path), conf)
    assert inv.source == DATANODE_LIST and inv.problems == ()
    assert [
        (h.host, h.address, h.uuid, h.op_state, h.health, h.failed_volumes) for h in inv.hosts
    ] == expected
    for h in inv.hosts:
        assert h.volumes == ("/data/disk1", "/data/disk2", "/data/disk3")
    # dead, decommissioning and in-maintenance nodes are kept, found by UUID, name and address
    assert set(inv.by_uuid()) == {DN1, DN2, DN3}
    assert inv.host_named("10.0.0.12").uuid == DN2
    assert inv.host_named("OZONE-DN3.example.com.").uuid == DN3
    assert inv.host_named("ozone-dn4.example.com") is None
    dn3 = inv.by_uuid()[DN3]
    failed = [v for v in dn3.volumes if dn3.volume_failed(v)]
    assert failed == (["/data/disk3"] if name.startswith("example1") else [])


def test_datanode_list_needs_ozone_conf() -> None:
    path = str(GOLDEN / "example1-list-json.json")
    with pytest.raises(InventoryError, match="--ozone-conf") as info:
        load_inventory(path)
    assert str(info.value).startswith(path + ": ")
    with pytest.raises(InventoryError, match="--ozone-conf"):
        parse_inventory((GOLDEN / "example1-list-json.json").read_text())


def dn_entry(host: str = "dn1.example", uuid: str = DN1, **more: Any) -> Dict[str, Any]:
    e = {
        "id": uuid,
        "hostName": host,
        "ipAddress": "10.1.1.1",
        "opState": "IN_SERVICE",
        "healthState": "HEALTHY",
    }
    e.update(more)
    return e


def test_datanode_list_unknown_fields_ignored_unknown_states_reported() -> None:
    entry = dn_entry(
        futureField={"nested": [1, 2]}, opState="RETIRING", healthState="STALE", id=DN1.upper()
    )
    inv = parse_inventory(json.dumps([entry]), VOLS)
    (h,) = inv.hosts
    assert (h.uuid, h.op_state, h.health, h.volumes) == (DN1, "RETIRING", "STALE", tuple(VOLS))
    assert len(inv.problems) == 1 and "RETIRING" in inv.problems[0]


@pytest.mark.parametrize(
    "change, match",
    [
        ({"id": "not-a-uuid"}, "id: 'not-a-uuid' is not a datanode UUID"),
        ({"id": None}, "is not a datanode UUID"),
        ({"hostName": ""}, "empty host name"),
        ({"hostName": "a b"}, "not a plausible host name"),
        ({"ipAddress": "10.1.1"}, "is not an IP address"),
        ({"ipAddress": 10}, "is not an IP address"),
        ({"opState": "in service\n"}, "is not a state name"),
        ({"healthState": 3}, "is not a state name"),
    ],
)
def test_datanode_list_bad_fields(change: Dict[str, Any], match: str) -> None:
    refused(
        json.dumps([dn_entry(), dn_entry("dn2.example", DN2, **change)]), match=f"entry 2.*{match}"
    )


def test_datanode_list_missing_address_and_bad_failed_volumes() -> None:
    entry = dn_entry(ipAddress="", failedVolumes=["relative/hdds", "/data/disk1/hdds", 7])
    inv = parse_inventory(json.dumps([entry]), VOLS)
    (h,) = inv.hosts
    assert h.address is None and h.names() == ("dn1.example",)
    assert h.failed_volumes == ("/data/disk1/hdds",)
    assert h.volume_failed("/data/disk1") and not h.volume_failed("/data/disk2")
    assert len(inv.problems) == 2


# ---- the plain host list -------------------------------------------------------------------


def test_plain_list_with_uuid_and_volumes() -> None:
    text = plain(
        {
            "host": "dn1.example",
            "uuid": DN1.upper(),
            "address": "10.0.0.1",
            "volumes": ["/data/disk1/", "/data//disk2"],
        },
        {"host": "dn2.example", "uuid": DN2, "volumes": ["/srv/ozone/disk1"]},
    )
    inv = parse_inventory(text)
    assert inv.source == HOST_LIST and inv.problems == ()
    assert inv.hosts == (
        Host("dn1.example", "10.0.0.1", DN1, ("/data/disk1", "/data/disk2")),
        Host("dn2.example", None, DN2, ("/srv/ozone/disk1",)),
    )
    assert inv.hosts[0].names() == ("dn1.example", "10.0.0.1")
    assert inv.by_uuid() == {DN1: inv.hosts[0], DN2: inv.hosts[1]}


def test_plain_list_without_uuid_and_volumes(tmp_path: Path) -> None:
    conf = site(tmp_path, prop("hdds.datanode.dir", "/data/disk1,/data/disk2"))
    path = tmp_path / "hosts.json"
    path.write_text(
        plain(
            {"host": "dn1.example"},
            {"host": "dn2.example", "volumes": ["/other/disk"]},
            {"host": "127.0.0.3"},
        )
    )
    inv = load_inventory(str(path), conf)
    assert [(h.host, h.uuid, h.volumes) for h in inv.hosts] == [
        ("dn1.example", None, ("/data/disk1", "/data/disk2")),
        ("dn2.example", None, ("/other/disk",)),
        ("127.0.0.3", None, ("/data/disk1", "/data/disk2")),
    ]
    assert inv.by_uuid() == {}
    assert inv.host_named("127.0.0.3") is inv.hosts[2]
    # without --ozone-conf a host that names no volumes has none: refused
    with pytest.raises(
        InventoryError,
        match=r"entry 1 \(dn1.example\): no volumes, and no "
        r"--ozone-conf gave hdds.datanode.dir",
    ):
        load_inventory(str(path))


def test_plain_list_unknown_key_reported_not_fatal() -> None:
    inv = parse_inventory(plain({"host": "dn1.example", "uid": DN1, "volumes": VOLS}))
    assert inv.hosts[0].uuid is None
    assert inv.problems == ("entry 1 (dn1.example): unknown key(s) 'uid' ignored",)


def test_ipv6_addresses_canonical() -> None:
    inv = parse_inventory(plain({"host": "dn1.example", "address": "FE80:0:0::1", "volumes": VOLS}))
    assert inv.hosts[0].address == "fe80::1"
    assert inv.host_named("fe80:0000::0001") is inv.hosts[0]
    inv = parse_inventory(json.dumps([dn_entry(ipAddress="2001:DB8:0::7")]), VOLS)
    assert inv.hosts[0].address == "2001:db8::7"
    assert inv.hosts[0].names() == ("dn1.example", "2001:db8::7")


# ---- validation ----------------------------------------------------------------------------


def test_not_an_array_of_objects() -> None:
    refused("{}", match="not a JSON array of hosts")
    refused("[]", match="lists no hosts")
    refused('[{"host": "a.example", "volumes": ["/a"]}, 3]', match="entry 2 is not an object")
    refused("[{", match="not JSON")
    refused("[" * 100_000 + "]" * 100_000, match="not JSON")
    refused('[{"host": "a", "host": "b"}]', match="key 'host' given twice")
    refused("[" + "1" * 5000 + "]", match="not JSON")  # an integer too long to convert


def test_formats_told_apart_by_keys() -> None:
    refused('[{"volumes": ["/a"]}]', match="entry 1 has no host")
    refused('[{"host": "a", "hostName": "a"}]', match="both 'host' and 'hostName'")
    refused(
        json.dumps([{"host": "a.example"}, dn_entry()]),
        match=f"entry 2 is a {DATANODE_LIST} entry, but entry 1 is a {HOST_LIST} entry",
    )


def test_too_many_hosts() -> None:
    refused("[" + ",".join(["{}"] * (MAX_HOSTS + 1)) + "]", match=f"more than {MAX_HOSTS}")


@pytest.mark.parametrize(
    "host",
    [
        "",
        "dn1/x",
        "dn1\0",
        "dn 1",
        "dn1\n",
        "\tdn1",
        "a" * 254,
        "-dn1",
        "dn1.-x",
        "dn1..x",
        ".",
        "dn1.example.123",
        "10.0.0.256",
        "dnü.example",
        7,
        None,
        ["dn1"],
        # issue 36: only [A-Za-z0-9.-] names and plain IP literals (a host name is printed in
        # commands run as root): no scope ID (its text after '%' is anything), no '_', no shell
        # metacharacter
        "fe80::1%eth0",
        "fe80::1%eth0;reboot",
        "DN_1.example",
        "dn1;reboot",
        "dn1$(id)",
        "`id`",
        "dn1|x",
        "dn1&",
        "dn1'x",
        'dn1"x',
        "dn1*",
        "dn1~",
        "dn1>x",
        "[::1]",
        "dn1:9858",
    ],
)
def test_implausible_host_names_refused(host: Any) -> None:
    msg = refused(plain({"host": host, "volumes": VOLS}), match="entry 1: ")
    assert "host name" in msg
    msg = refused(json.dumps([dn_entry(hostName=host)]), match="entry 1: hostName: ")
    assert "host name" in msg


@pytest.mark.parametrize("address", ["fe80::1%eth0", "fe80::1%1", "10.0.0.1;id", "10.0.0.1 "])
def test_address_not_a_plain_ip_literal_refused(address: str) -> None:
    refused(
        plain({"host": "dn1", "address": address, "volumes": VOLS}),
        match=r"entry 1 \(dn1\): address .* is not an IP address",
    )
    refused(
        json.dumps([dn_entry(ipAddress=address)]),
        match=r"entry 1 \(dn1.example\): ipAddress .* is not an IP address",
    )


@pytest.mark.parametrize(
    "host",
    [
        "dn1",
        "dn1.example.com",
        "dn1.example.com.",
        "DN-1.example",
        "10.0.0.1",
        "::1",
        "fe80::1",
        "a" * 63 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 61,
    ],
)
def test_plausible_host_names_accepted(host: str) -> None:
    assert parse_inventory(plain({"host": host, "volumes": VOLS})).hosts[0].host == host


@pytest.mark.parametrize(
    "uuid",
    [
        "",
        "2b5b5a0e5a8b4d0c9d8e0f1a2b3c4d01",
        "{" + DN1 + "}",
        "urn:uuid:" + DN1,
        DN1[:-1],
        DN1 + "\n",
        DN1.replace("2", "g"),
        12345,
    ],
)
def test_bad_uuid_refused(uuid: Any) -> None:
    refused(
        plain({"host": "dn1", "uuid": uuid, "volumes": VOLS}),
        match=r"entry 1 \(dn1\): uuid: .* is not a datanode UUID",
    )


def test_same_host_twice() -> None:
    refused(
        plain(
            {"host": "dn1.example", "volumes": VOLS},
            {"host": "dn2.example", "volumes": VOLS},
            {"host": "DN1.example.", "volumes": VOLS},
        ),
        match=r"two entries for host DN1.example.: entries 1 and 3",
    )


def test_same_uuid_twice() -> None:
    msg = refused(
        plain(
            {"host": "a.example", "uuid": DN1, "volumes": VOLS},
            {"host": "b.example", "uuid": DN1.upper(), "volumes": VOLS},
        )
    )
    assert msg == f"inv.json: two hosts claim datanode UUID {DN1}: a.example and b.example"
    refused(
        json.dumps([dn_entry("a.example"), dn_entry("b.example", ipAddress="10.9.9.9")]),
        match=f"two hosts claim datanode UUID {DN1}: a.example and b.example",
    )


def test_same_name_two_hosts() -> None:
    # an executor registered as 10.0.0.1 could not be told apart
    refused(
        plain(
            {"host": "a.example", "address": "10.0.0.1", "volumes": VOLS},
            {"host": "10.0.0.1", "volumes": VOLS},
        ),
        match="two hosts answer to 10.0.0.1: a.example and 10.0.0.1",
    )
    refused(
        plain(
            {"host": "a.example", "address": "10.0.0.1", "volumes": VOLS},
            {"host": "b.example", "address": "10.0.0.1", "volumes": VOLS},
        ),
        match="two hosts answer to 10.0.0.1: a.example and b.example",
    )


@pytest.mark.parametrize(
    "volumes, match",
    [
        (["data/disk1"], "is not an absolute path"),
        (["/data/disk1\0"], "contains NUL"),
        (["/data/../etc"], "has a '..' component"),
        (["/data/disk1/.."], "has a '..' component"),
        (["/data/disk\n1"], "contains a control character"),
        (["/data/disk1", "/data/disk2", "/data/disk1/"], "volume /data/disk1 listed twice"),
        (["/data/./disk1", "//data/disk1"], "volume /data/disk1 listed twice"),
        (
            [f"/d{i}" for i in range(MAX_VOLUMES_PER_HOST + 1)],
            f"more than {MAX_VOLUMES_PER_HOST} volumes",
        ),
        (["/" + "a" * 5000], "more than 4096"),
        ([17], "is not a string"),
        ([], "empty volumes list"),
        ("/data/disk1", "is not a list"),
    ],
)
def test_bad_volumes_refused(volumes: Any, match: str) -> None:
    refused(plain({"host": "dn1", "volumes": volumes}), match=r"entry 1 \(dn1\): .*" + match)


def test_total_volume_and_problem_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    import merkle.replica.inventory as inventory

    monkeypatch.setattr(inventory, "MAX_VOLUMES_TOTAL", 5)
    hosts = [{"host": f"dn{i}.example", "volumes": ["/a", "/b"]} for i in range(3)]
    assert len(parse_inventory(plain(*hosts[:2])).hosts) == 2
    refused(plain(*hosts), match="entry 3: more than 5 volumes in the inventory")
    refused(
        plain({"host": "dn1.example", "volumes": ["/a"], "failed_volumes": ["/a/hdds"] * 5}),
        match="entry 1: more than 5 volumes",
    )
    monkeypatch.setattr(inventory, "MAX_VOLUMES_TOTAL", 100)
    monkeypatch.setattr(inventory, "MAX_PROBLEMS", 3)
    inv = parse_inventory(
        plain(*[{"host": f"dn{i}.example", "volumes": ["/a"], "x": 1} for i in range(10)])
    )
    assert len(inv.hosts) == 10
    assert inv.problems[:3] == tuple(
        f"entry {i} (dn{i - 1}.example): unknown key(s) 'x' ignored" for i in (1, 2, 3)
    )
    assert inv.problems[3:] == ("7 more problems not listed",)


def test_bad_default_volumes_refused() -> None:
    refused(plain({"host": "dn1"}), defaults=["relative"], match="not an absolute path")


def test_volumes_normalised() -> None:
    inv = parse_inventory(plain({"host": "dn1", "volumes": ["//data/./disk1/", "/"]}))
    assert inv.hosts[0].volumes == ("/data/disk1", "/")


def test_inventory_size_cap_and_unreadable_files(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(MAX_INVENTORY_BYTES + 1)  # sparse: refused on its size, never read
    with pytest.raises(InventoryError, match="cannot read the inventory"):
        load_inventory(str(big))
    with pytest.raises(InventoryError, match="cannot read the inventory"):
        load_inventory(str(tmp_path / "missing.json"))
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # must not block waiting for a writer
    with pytest.raises(InventoryError, match="cannot read the inventory"):
        load_inventory(str(fifo))
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'[{"host": "dn\xe9"}]')
    with pytest.raises(InventoryError, match="not UTF-8"):
        load_inventory(str(latin))


# ---- ozone-site.xml ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        ("/data/disk1,/data/disk2", ["/data/disk1", "/data/disk2"]),
        ("[DISK]/data/disk1,[SSD]file:///data/ssd1", ["/data/disk1", "/data/ssd1"]),
        (
            "[ssd]/data/ssd1,[]/data/disk1,[RAM_DISK] /mnt/ram",
            ["/data/ssd1", "/data/disk1", "/mnt/ram"],
        ),
        (
            "\n   /data/disk1 ,\n\t/data/disk2\n  /data/disk3  ",
            ["/data/disk1", "/data/disk2", "/data/disk3"],
        ),
        ("/data/disk1,,, ,/data/disk2,", ["/data/disk1", "/data/disk2"]),
        ("/data/disk1,/data/disk1,/data/disk1/", ["/data/disk1"]),
        (
            "file:/data/disk1,file://localhost/data/disk2,FILE:///data/disk3/",
            ["/data/disk1", "/data/disk2", "/data/disk3"],
        ),
        ("file:///data/my%20disk", ["/data/my%20disk"]),  # Hadoop's Path decodes nothing
        ("//data//disk1/./", ["/data/disk1"]),
        # repeats merged after normalising too, the first place kept; exactly the cap is fine
        ("/b,/a,/b/,//b/./,/a", ["/b", "/a"]),
        (
            ",".join(f"/d{i}" for i in range(MAX_VOLUMES_PER_HOST)) + ",/d0/",
            [f"/d{i}" for i in range(MAX_VOLUMES_PER_HOST)],
        ),
    ],
)
def test_datanode_dirs(tmp_path: Path, value: str, expected: List[str]) -> None:
    assert dirs_of(tmp_path, value) == expected


@pytest.mark.parametrize(
    "value, match",
    [
        ("data/disk1", "is not an absolute path"),
        ("[DISK]data/disk1", "is not an absolute path"),
        ("/data/disk1,/data/../etc", "'..' component"),
        ("[FAST]/data/disk1", "unknown storage type FAST"),
        ("hdfs://nn/data", "not a local directory"),
        ("s3a:/bucket", "not a local directory"),
        ("file://dn7/data/disk1", "names another host"),
        ("${hadoop.tmp.dir}/dfs/data", "substitution"),
        ("   ", "is empty"),
        (" , ,", "is empty"),
        (
            ",".join(f"/d{i}" for i in range(MAX_VOLUMES_PER_HOST + 1)),
            f"lists more than {MAX_VOLUMES_PER_HOST} directories",
        ),
    ],
)
def test_datanode_dirs_refused(tmp_path: Path, value: str, match: str) -> None:
    with pytest.raises(InventoryError, match=match) as info:
        dirs_of(tmp_path, value)
    assert "\n" not in str(info.value)


def test_fallback_key_and_hadoop_override_rules(tmp_path: Path) -> None:
    read = lambda body: read_datanode_dirs(site(tmp_path, body))  # noqa: E731
    assert read(prop("dfs.datanode.data.dir", "/old/disk1")) == ["/old/disk1"]
    # both names are one key, as OzoneConfiguration's deprecation makes them: the last wins ...
    assert read(prop("hdds.datanode.dir", "/new") + prop("dfs.datanode.data.dir", "/old")) == [
        "/old"
    ]
    assert read(prop("dfs.datanode.data.dir", "/old") + prop("hdds.datanode.dir", "/new")) == [
        "/new"
    ]
    # ... unless an earlier one was final; and a property without a value sets nothing
    assert read(
        prop("hdds.datanode.dir", "/new", final=True) + prop("dfs.datanode.data.dir", "/old")
    ) == ["/new"]
    assert read(
        prop("hdds.datanode.dir", "/new")
        + prop("hdds.datanode.dir", "")
        + "<property><name>hdds.datanode.dir</name><value/></property>"
    ) == ["/new"]
    # Hadoop's short form, names trimmed, and other keys left alone
    assert read('<property name="hdds.datanode.dir" value="/short"/>') == ["/short"]
    assert read(prop(" hdds.datanode.dir ", "/trimmed") + prop("ozone.metadata.dirs", "/m")) == [
        "/trimmed"
    ]


def test_missing_key(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="sets no hdds.datanode.dir"):
        read_datanode_dirs(site(tmp_path, prop("ozone.metadata.dirs", "/meta")))
    with pytest.raises(InventoryError, match="sets no hdds.datanode.dir"):
        read_datanode_dirs(site(tmp_path, "<property><name>hdds.datanode.dir</name></property>"))


XXE = """<?xml version="1.0"?>
<!DOCTYPE configuration [<!ENTITY x SYSTEM "file:///etc/hostname">]>
<configuration><property><name>hdds.datanode.dir</name><value>/a&x;</value></property>
</configuration>"""
LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE c [<!ENTITY a "aaaaaaaaaa">'
    + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(8))
    + "]>\n<configuration><property><name>hdds.datanode.dir</name>"
    "<value>/&i;</value></property></configuration>"
)


@pytest.mark.parametrize(
    "text, match",
    [
        ('<?xml version="1.0"?>\n<!DOCTYPE configuration>\n<configuration/>', "DOCTYPE"),
        (XXE, "DOCTYPE or entity declaration"),  # refused before the parser sees it
        (LAUGHS, "DOCTYPE or entity declaration"),
        (
            "<configuration><property><name>hdds.datanode.dir</name><value>/a&x;</value>"
            "</property></configuration>",
            "not XML: undefined entity",
        ),
        (
            '<configuration xmlns:xi="http://www.w3.org/2001/XInclude"><xi:include href="/etc/x"/>'
            "</configuration>",
            "XInclude",
        ),
        ("<configuration><property>", "not XML"),
        ("hdds.datanode.dir=/data/disk1", "not XML"),
        (
            '<beans><property name="hdds.datanode.dir" value="/a"/></beans>',
            "not a Hadoop configuration file",
        ),
    ],
)
def test_hostile_xml_refused(tmp_path: Path, text: str, match: str) -> None:
    p = tmp_path / "ozone-site.xml"
    p.write_text(text)
    with pytest.raises(InventoryError, match=match) as info:
        read_datanode_dirs(str(p))
    assert "\n" not in str(info.value) and str(info.value).startswith(str(p))


def test_doctype_refused_by_the_parser_too() -> None:
    """The second guard, behind the text search: the tree builder refuses any DOCTYPE."""
    import xml.etree.ElementTree as ET

    parser = ET.XMLParser(target=_NoDoctype())
    with pytest.raises(ValueError, match="DOCTYPE"):
        parser.feed("<!DOCTYPE c><c/>")
        parser.close()


def test_ozone_site_size_cap_and_unreadable(tmp_path: Path) -> None:
    big = tmp_path / "ozone-site.xml"
    with open(big, "wb") as f:
        f.truncate(MAX_OZONE_SITE_BYTES + 1)
    with pytest.raises(InventoryError, match="cannot read the ozone-site.xml"):
        read_datanode_dirs(str(big))
    fifo = tmp_path / "fifo.xml"
    os.mkfifo(fifo)
    with pytest.raises(InventoryError, match="cannot read the ozone-site.xml"):
        read_datanode_dirs(str(fifo))
    with pytest.raises(InventoryError, match="cannot read the ozone-site.xml"):
        read_datanode_dirs(str(tmp_path))
    utf16 = tmp_path / "utf16.xml"
    utf16.write_bytes("<configuration/>".encode("utf-16"))
    with pytest.raises(InventoryError, match="not UTF-8"):
        read_datanode_dirs(str(utf16))
    # just under the cap is read (padding in a comment)
    ok = tmp_path / "padded.xml"
    head = "<configuration>" + prop("hdds.datanode.dir", "/data/disk1") + "<!--"
    tail = "--></configuration>"
    ok.write_text(head + "x" * (MAX_OZONE_SITE_BYTES - len(head) - len(tail)) + tail)
    assert os.path.getsize(ok) == MAX_OZONE_SITE_BYTES
    assert read_datanode_dirs(str(ok)) == ["/data/disk1"]


def test_errors_are_replica_errors() -> None:
    assert issubclass(InventoryError, ReplicaError)


# ---- inventory_json ------------------------------------------------------------------------


def test_golden_round_trip(tmp_path: Path) -> None:
    conf = site(tmp_path, prop("hdds.datanode.dir", "[DISK]/data/disk1,/data/disk3"))
    inv = load_inventory(str(GOLDEN / "example1-list-json.json"), conf)
    back = parse_inventory(inventory_json(inv))
    assert back.source == HOST_LIST and back.problems == ()
    assert back.hosts == inv.hosts


_label = st.builds(
    lambda a, b: a + b, st.sampled_from("abcz09"), st.text(alphabet="abcxyz019-", max_size=12)
)
_hostname = (
    st.lists(_label, min_size=1, max_size=4)
    .map(".".join)
    .filter(lambda h: not h.split(".")[-1].isdigit())
)
_address = st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)).map(str)
_segment = st.text(alphabet="aZ09_.%:#@ -\u00e9", min_size=1, max_size=12).filter(
    lambda s: s not in (".", "..")
)
_volume = st.lists(_segment, min_size=1, max_size=4).map(lambda p: "/" + "/".join(p))


@st.composite
def inventories(draw: Any) -> Inventory:
    names = draw(st.lists(_hostname, min_size=1, max_size=6, unique_by=str.lower))
    addresses = draw(st.lists(_address, min_size=len(names), max_size=len(names), unique=True))
    uuids = draw(
        st.lists(st.uuids().map(str), min_size=len(names), max_size=len(names), unique=True)
    )
    hosts = []
    for name, address, uuid in zip(names, addresses, uuids):
        volumes = draw(st.lists(_volume, min_size=1, max_size=4, unique=True))
        failed = draw(
            st.lists(st.sampled_from(volumes).map(lambda v: v + "/hdds"), unique=True, max_size=2)
        )
        hosts.append(
            Host(
                host=name,
                address=draw(st.none() | st.just(address)),
                uuid=draw(st.none() | st.just(uuid)),
                volumes=tuple(volumes),
                op_state=draw(st.none() | st.sampled_from(["IN_SERVICE", "DECOMMISSIONED"])),
                health=draw(st.none() | st.sampled_from(["HEALTHY", "DEAD"])),
                failed_volumes=tuple(failed),
            )
        )
    return Inventory(hosts=tuple(hosts), source=HOST_LIST)


@settings(max_examples=100, deadline=None)
@given(inventories())
def test_inventory_json_round_trip(inv: Inventory) -> None:
    text = inventory_json(inv)
    back = parse_inventory(text)
    assert back == inv
    assert inventory_json(back) == text


@pytest.mark.parametrize("defaults", [(), ("/conf/disk1",)])
def test_misspelt_volumes_is_named_in_the_error(defaults: tuple) -> None:
    """A hosts file's 'volumse' is named (with the key it misspells): it was "no volumes, and
    no --ozone-conf gave hdds.datanode.dir" without a word of it, and with --ozone-conf the
    host silently got the configuration's volumes instead of its own."""
    with pytest.raises(
        InventoryError,
        match=r"entry 1 \(dn1.example\): unknown key\(s\) "
        r"'volumse' \(volumes\?\)",
    ):
        parse_inventory(plain({"host": "dn1.example", "volumse": VOLS}), defaults)


def test_unknown_key_named_when_the_entry_is_refused() -> None:
    with pytest.raises(
        InventoryError,
        match=r"not an IP address \(unknown key\(s\) 'adress' "
        r"\(address\?\) ignored\)",
    ):
        parse_inventory(
            plain({"host": "dn1.example", "adress": "x", "address": "nope", "volumes": VOLS})
        )


def test_bookie_hosts_name_their_bookie_and_round_trip() -> None:
    """The plain list's `bookie` (BookKeeper: the bookie ID expected on the host, its
    ledger directories as `volumes`) is kept as given and written back by inventory_json."""
    inv = parse_inventory(
        plain(
            {"host": "bk1.example", "bookie": "bk1.example:3181", "volumes": VOLS},
            {"host": "bk2.example", "volumes": VOLS},
        )
    )
    assert [h.bookie for h in inv.hosts] == ["bk1.example:3181", None]
    assert parse_inventory(inventory_json(inv)).hosts == inv.hosts


@pytest.mark.parametrize(
    "bookie",
    ["", "../../etc:3181", "bk1 :3181", "bk1\n:3181", "readonly", "a" * 256, 3181, ["bk1"]],
)
def test_bad_bookie_id_refused(bookie: Any) -> None:
    refused(
        plain({"host": "bk1", "bookie": bookie, "volumes": VOLS}),
        match=r"entry 1 \(bk1\): bookie .* is not a bookie ID",
    )


def test_same_bookie_twice() -> None:
    msg = refused(
        plain(
            {"host": "a.example", "bookie": "bk:3181", "volumes": VOLS},
            {"host": "b.example", "bookie": "bk:3181", "volumes": VOLS},
        )
    )
    assert msg == "inv.json: two hosts claim bookie bk:3181: a.example and b.example"
