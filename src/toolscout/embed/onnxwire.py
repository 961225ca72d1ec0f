"""The ONNX file format at the protobuf wire level: what ``embed/fused.py`` reads and writes.

An ONNX file is one protobuf ``ModelProto``. The fused query graph is made from the
shipped file without the ``onnx`` package (an optional extra), so this module reads a
message as its list of fields — (field number, wire type, value), the value an int for
varint and fixed-width fields and the bytes for length-delimited ones — and writes such a
list back. Fields it does not look at are carried over byte for byte. Only the messages
and fields the rewrite needs are named here (numbers from ``onnx/onnx.proto``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from toolscout.errors import ModelError

VARINT, I64, LEN, I32 = 0, 1, 2, 5

#: (field number, wire type, value)
Field = tuple[int, int, "int | bytes"]

# ModelProto
MODEL_GRAPH, MODEL_OPSET = 7, 8
# OperatorSetIdProto
OPSET_DOMAIN, OPSET_VERSION = 1, 2
# GraphProto
GRAPH_NODE, GRAPH_INITIALIZER, GRAPH_OUTPUT, GRAPH_VALUE_INFO = 1, 5, 12, 13
# ValueInfoProto
VALUE_NAME = 1
# NodeProto
NODE_INPUT, NODE_OUTPUT, NODE_NAME, NODE_OP_TYPE, NODE_ATTRIBUTE, NODE_DOMAIN = 1, 2, 3, 4, 5, 7
# AttributeProto and its type enum
ATTR_NAME, ATTR_FLOAT, ATTR_INT, ATTR_TYPE = 1, 2, 3, 20
ATTR_TYPE_FLOAT, ATTR_TYPE_INT = 1, 2
# TensorProto and its data types
TENSOR_DIMS, TENSOR_DATA_TYPE, TENSOR_NAME, TENSOR_RAW = 1, 2, 8, 9
FLOAT, INT8, INT32 = 1, 3, 6


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ModelError("ONNX file: a varint runs past its message")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def parse(buf: bytes) -> list[Field]:
    """A message's fields, in file order."""
    out: list[Field] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == VARINT:
            value, pos = _varint(buf, pos)
        elif wire == LEN:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        elif wire in (I64, I32):
            width = 8 if wire == I64 else 4
            value, pos = int.from_bytes(buf[pos : pos + width], "little"), pos + width
        else:
            raise ModelError(f"ONNX file: unsupported protobuf wire type {wire}")
        if pos > len(buf):
            raise ModelError("ONNX file: a field runs past its message")
        out.append((number, wire, value))
    return out


def _put_varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 as two's complement, as protobuf writes it
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode(fields: list[Field]) -> bytes:
    """The message's bytes (the inverse of :func:`parse`)."""
    parts: list[bytes] = []
    for number, wire, value in fields:
        parts.append(_put_varint(number << 3 | wire))
        if wire == VARINT:
            parts.append(_put_varint(int(value)))
        elif wire == LEN:
            data = bytes(value) if isinstance(value, bytes) else b""
            parts.append(_put_varint(len(data)))
            parts.append(data)
        else:
            parts.append(int(value).to_bytes(8 if wire == I64 else 4, "little"))
    return b"".join(parts)


def text(value: int | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else ""


def strings(fields: list[Field], number: int) -> list[str]:
    return [text(v) for n, w, v in fields if n == number and w == LEN]


def string_field(number: int, value: str) -> Field:
    return (number, LEN, value.encode())


@dataclass
class Node:
    """A ``NodeProto``: the names the rewrite reads and changes, and the rest (its
    attributes among them) as they were."""

    op_type: str
    inputs: list[str]
    outputs: list[str]
    name: str = ""
    domain: str = ""
    rest: list[Field] = field(default_factory=list)

    @classmethod
    def read(cls, buf: bytes) -> Node:
        fields = parse(buf)
        named = {NODE_INPUT, NODE_OUTPUT, NODE_NAME, NODE_OP_TYPE, NODE_DOMAIN}
        return cls(
            op_type="".join(strings(fields, NODE_OP_TYPE)),
            inputs=strings(fields, NODE_INPUT),
            outputs=strings(fields, NODE_OUTPUT),
            name="".join(strings(fields, NODE_NAME)),
            domain="".join(strings(fields, NODE_DOMAIN)),
            rest=[f for f in fields if f[0] not in named],
        )

    def write(self) -> bytes:
        fields: list[Field] = [string_field(NODE_INPUT, i) for i in self.inputs]
        fields += [string_field(NODE_OUTPUT, o) for o in self.outputs]
        fields += [string_field(NODE_NAME, self.name), string_field(NODE_OP_TYPE, self.op_type)]
        fields += self.rest
        if self.domain:
            fields.append(string_field(NODE_DOMAIN, self.domain))
        return encode(fields)


def int_attribute(name: str, value: int) -> Field:
    attr = [string_field(ATTR_NAME, name), (ATTR_INT, VARINT, value)]
    return (NODE_ATTRIBUTE, LEN, encode([*attr, (ATTR_TYPE, VARINT, ATTR_TYPE_INT)]))


@dataclass
class Tensor:
    """An initializer stored as raw little-endian bytes (how exporters write weights)."""

    name: str
    data_type: int
    dims: list[int]
    raw: bytes

    @classmethod
    def read(cls, buf: bytes) -> Tensor:
        fields = parse(buf)
        dims: list[int] = []
        raw: bytes | None = None
        data_type = 0
        for number, wire, value in fields:
            if number == TENSOR_DIMS and wire == VARINT:
                dims.append(int(value))
            elif number == TENSOR_DIMS and wire == LEN and isinstance(value, bytes):
                pos = 0  # packed
                while pos < len(value):
                    dim, pos = _varint(value, pos)
                    dims.append(dim)
            elif number == TENSOR_DATA_TYPE and wire == VARINT:
                data_type = int(value)
            elif number == TENSOR_RAW and isinstance(value, bytes):
                raw = value
        name = "".join(strings(fields, TENSOR_NAME))
        if raw is None:
            raise ModelError(f"ONNX file: initializer {name!r} is not stored as raw bytes")
        return cls(name, data_type, dims, raw)

    def write(self) -> bytes:
        fields: list[Field] = [(TENSOR_DIMS, VARINT, d) for d in self.dims]
        fields += [(TENSOR_DATA_TYPE, VARINT, self.data_type), string_field(TENSOR_NAME, self.name)]
        return encode([*fields, (TENSOR_RAW, LEN, self.raw)])


def value_name(value: int | bytes) -> str:
    """The name of a graph's ``ValueInfoProto`` (an input, output or value info), "" if empty."""
    return "".join(strings(parse(bytes(value)), VALUE_NAME)) if value else ""


def live_nodes(nodes: list[Node], outputs: list[str]) -> list[Node]:
    """The nodes the outputs depend on, in their order (a topological one)."""
    producer = {o: i for i, node in enumerate(nodes) for o in node.outputs}
    keep: set[int] = set()
    stack = list(outputs)
    while stack:
        index = producer.get(stack.pop())
        if index is not None and index not in keep:
            keep.add(index)
            stack.extend(n for n in nodes[index].inputs if n)
    return [node for i, node in enumerate(nodes) if i in keep]


def read_graph(
    model_bytes: bytes,
) -> tuple[list[Field], list[Field], list[Node], dict[str, Tensor]]:
    """A model's fields, its one graph's fields, the graph's nodes and its initializers by
    name; ModelError when the model does not hold exactly one graph."""
    model = parse(model_bytes)
    graphs = [v for n, w, v in model if n == MODEL_GRAPH and isinstance(v, bytes)]
    if len(graphs) != 1:
        raise ModelError("ONNX file: expected one graph")
    graph = parse(graphs[0])
    nodes = [Node.read(bytes(v)) for n, _, v in graph if n == GRAPH_NODE]
    inits = {
        t.name: t for t in (Tensor.read(bytes(v)) for n, _, v in graph if n == GRAPH_INITIALIZER)
    }
    return model, graph, nodes, inits


def with_graph(
    model: list[Field], graph: list[Field], nodes: list[Node], inits: dict[str, Tensor]
) -> list[Field]:
    """``model``'s fields with its graph rewritten to ``nodes``: only the nodes the graph's
    outputs depend on (:func:`live_nodes`), the initializers they read, and the graph's other
    fields but the shapes of values no kept node produces (a rewrite removed them)."""
    outputs = [value_name(v) for n, _, v in graph if n == GRAPH_OUTPUT]
    nodes = live_nodes(nodes, outputs)
    produced = {o for node in nodes for o in node.outputs}
    used = {i for node in nodes for i in node.inputs}
    rest = [
        (number, kind, value)
        for number, kind, value in graph
        if number not in (GRAPH_NODE, GRAPH_INITIALIZER)
        and not (number == GRAPH_VALUE_INFO and value_name(value) not in produced)
    ]
    new_graph: list[Field] = [(GRAPH_NODE, LEN, n.write()) for n in nodes]
    new_graph += [(GRAPH_INITIALIZER, LEN, t.write()) for t in inits.values() if t.name in used]
    return [(n, w, encode(new_graph + rest) if n == MODEL_GRAPH else v) for n, w, v in model]


__all__ = [
    "Field",
    "Node",
    "Tensor",
    "encode",
    "int_attribute",
    "live_nodes",
    "parse",
    "read_graph",
    "string_field",
    "strings",
    "value_name",
    "with_graph",
]
