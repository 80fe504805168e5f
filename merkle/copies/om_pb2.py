"""Protobuf classes for the OM DB values crcmerkle reads, as declared in om.proto beside this
file (package crcmerkle.om). No protoc is part of the toolchain, so the descriptors are built
here from om.proto's own text (a regular expression per field: om.proto is kept in that simple
form); tests/test_omdb.py decodes Ozone's golden records with them."""

import re
from pathlib import Path
from typing import Dict, List

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_PACKAGE = "crcmerkle.om"
_FILE = "merkle/copies/om.proto"
_TYPES = {"bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
          "uint64": descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
          "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
          "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
          "uint32": descriptor_pb2.FieldDescriptorProto.TYPE_UINT32,
          "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL}
_LABELS = {"optional": descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
           "repeated": descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED}
_MESSAGE = re.compile(r"^message (\w+) \{\n(.*?)^\}", re.M | re.S)
_FIELD = re.compile(r"^\s*(optional|repeated) (\w+) (\w+) = (\d+);\s*$")


def proto_fields(text: str) -> Dict[str, List[tuple]]:
    """{message: [(label, type, name, number), ...]} of om.proto's text."""
    out: Dict[str, List[tuple]] = {}
    for m in _MESSAGE.finditer(text):
        rows = []
        for line in m.group(2).splitlines():
            if line.strip():
                f = _FIELD.match(line)
                if f is None:
                    raise ValueError(f"om.proto: {m.group(1)}: cannot read {line.strip()!r}")
                rows.append((f.group(1), f.group(2), f.group(3), int(f.group(4))))
        out[m.group(1)] = rows
    return out


def _build() -> Dict[str, type]:
    fields = proto_fields((Path(__file__).with_name("om.proto")).read_text(encoding="utf-8"))
    fdp = descriptor_pb2.FileDescriptorProto(name=_FILE, package=_PACKAGE, syntax="proto2")
    for name, rows in fields.items():
        msg = fdp.message_type.add(name=name)
        for label, typ, fname, number in rows:
            f = msg.field.add(name=fname, number=number, label=_LABELS[label])
            if typ in _TYPES:
                f.type = _TYPES[typ]
            else:
                f.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
                f.type_name = f".{_PACKAGE}.{typ}"
    pool = descriptor_pool.DescriptorPool()  # private: never clashes with another module's
    fd = pool.Add(fdp)
    fd = pool.FindFileByName(_FILE)
    return {n: message_factory.GetMessageClass(fd.message_types_by_name[n]) for n in fields}


_CLASSES = _build()
KeyValue = _CLASSES["KeyValue"]
ContainerBlockID = _CLASSES["ContainerBlockID"]
BlockID = _CLASSES["BlockID"]
KeyLocation = _CLASSES["KeyLocation"]
KeyLocationList = _CLASSES["KeyLocationList"]
ECReplicationConfig = _CLASSES["ECReplicationConfig"]
CompositeCrcFileChecksum = _CLASSES["CompositeCrcFileChecksum"]
FileChecksum = _CLASSES["FileChecksum"]
KeyInfo = _CLASSES["KeyInfo"]
DirectoryInfo = _CLASSES["DirectoryInfo"]
VolumeInfo = _CLASSES["VolumeInfo"]
BucketInfo = _CLASSES["BucketInfo"]
