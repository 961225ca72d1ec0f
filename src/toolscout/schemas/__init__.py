"""Reading tool parameter schemas as published, and validating arguments against them.

Real catalogs publish imperfect JSON Schema: draft-04 habits (``"exclusiveMinimum":
true``, ``"required": true`` inside a property), bounds written as strings
(``"maximum": "50"``). This module answers three questions about a schema:

* :func:`schema_problems` — quality problems, indexed with a warning;
* :func:`remote_refs` — references that would need a fetch; refused at import;
* :func:`make_validator` — the validator execution uses.

The validator

* uses the draft the schema declares in ``$schema`` (2020-12 when it declares none);
* when the schema is not valid for that draft, reads it leniently: draft-04 habits
  are translated to what they meant (which only ever refuses more), and whatever
  still cannot be read is dropped (never a ``pattern``: one that is refused refuses
  every call) — so the lenient reading never accepts what the
  strict reading refuses on the parts it can read;
* resolves only references inside the schema itself, through an explicit
  :class:`referencing.Registry` that never retrieves: no network, ever; a reference
  that does not resolve is a :class:`~toolscout.errors.SchemaError`;
* reads ``pattern`` as ECMA-262 does: ``$`` is the end of the input (``"INV-1\\n"``
  does not match ``^INV-[0-9]+$``) and ``\\d`` is ``[0-9]``, and matches it in linear
  time (RE2, :mod:`toolscout.patterns`): no pattern can stall a call; a pattern that
  does not compile, or needs backtracking, is :func:`invalid_patterns` — refused at
  import (:func:`toolscout.cards.make_spec`), never dropped;
* reads ``integer`` strictly: ``3.0`` is a number but not an integer, and is refused
  (the tool never receives a float where it declared an integer);
* refuses non-finite numbers (NaN, ±Infinity) anywhere in the arguments, and
  arguments nested deeper than :data:`MAX_DEPTH`, before validating
  (:class:`~toolscout.errors.ArgumentError`, never a ``RecursionError``).

The parts, one module each: ``schemas/drafts.py`` (the declared draft and its
metaschema's verdict), ``schemas/walk.py`` (subschemas, pointers, remote references),
``schemas/problems.py`` (quality problems and their codes), ``schemas/lenient.py`` (the
lenient reading), ``schemas/validator.py`` (the validator and the argument checks). This
module is their public face: callers import from here.
"""

from __future__ import annotations

from toolscout.patterns import ecma_regex
from toolscout.schemas.problems import DRAFT04_EXCLUSIVE_BOOL as DRAFT04_EXCLUSIVE_BOOL
from toolscout.schemas.problems import INVALID_2020_12 as INVALID_2020_12
from toolscout.schemas.problems import INVALID_FOR_DRAFT as INVALID_FOR_DRAFT
from toolscout.schemas.problems import INVALID_PATTERN as INVALID_PATTERN
from toolscout.schemas.problems import NOT_AN_OBJECT as NOT_AN_OBJECT
from toolscout.schemas.problems import REMOTE_REF as REMOTE_REF
from toolscout.schemas.problems import REQUIRED_IN_PROPERTY as REQUIRED_IN_PROPERTY
from toolscout.schemas.problems import STRING_NUMBER_BOUND as STRING_NUMBER_BOUND
from toolscout.schemas.problems import TOO_DEEP as TOO_DEEP
from toolscout.schemas.problems import UNKNOWN_DRAFT as UNKNOWN_DRAFT
from toolscout.schemas.problems import SchemaProblem, invalid_patterns, schema_problems
from toolscout.schemas.validator import ARGUMENTS_TOO_DEEP as ARGUMENTS_TOO_DEEP
from toolscout.schemas.validator import MAX_DEPTH, SchemaValidator, check_arguments, make_validator
from toolscout.schemas.validator import NON_FINITE as NON_FINITE
from toolscout.schemas.validator import SCHEMA_MISMATCH as SCHEMA_MISMATCH
from toolscout.schemas.validator import SCHEMA_TOO_DEEP as SCHEMA_TOO_DEEP
from toolscout.schemas.validator import UNRESOLVABLE_REF as UNRESOLVABLE_REF
from toolscout.schemas.walk import MAX_SCHEMA_DEPTH as MAX_SCHEMA_DEPTH
from toolscout.schemas.walk import remote_refs

__all__ = [
    "MAX_DEPTH",
    "SchemaProblem",
    "SchemaValidator",
    "check_arguments",
    "ecma_regex",
    "invalid_patterns",
    "make_validator",
    "remote_refs",
    "schema_problems",
]
