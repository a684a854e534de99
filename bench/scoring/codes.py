"""The scorer's error codes and lenient repairs: a small, stable taxonomy (reports, the gate
and ``bench compare`` key on these strings, so a code is never renamed, only added)."""

from __future__ import annotations

from bench.parse import (ANSWER_ERROR_CODES, REPAIR_ENUM_CASE, REPAIR_JSON_STRING,
                         REPAIR_STRING_BOOLEAN, REPAIR_STRING_NUMBER)

# Error codes (a small, stable taxonomy; reports and the gate key on these strings).
UNPARSEABLE = "unparseable"            # the answer could not be decoded into calls
FALSE_NO_CALL = "false_no_call"        # calls were expected, none was made
FALSE_CALL = "false_call"              # no call was expected, one was made
WRONG_TOOL = "wrong_tool"              # a call's tool is not the expected one
MISSING_CALL = "missing_call"          # fewer calls of a tool than expected
EXTRA_CALL = "extra_call"              # more calls of a tool than expected
HALLUCINATED_TOOL = "hallucinated_tool"  # a call names a tool that does not exist
WRONG_VALUE = "wrong_argument_value"   # an argument's value is not acceptable
MISSING_ARGUMENT = "missing_argument"  # an argument that may not be omitted was omitted
UNEXPECTED_ARGUMENT = "unexpected_argument"  # an argument the label does not allow was sent
SCHEMA_INVALID = "schema_invalid"      # a call's arguments fail the tool's JSON Schema
HALLUCINATED_ARGUMENT = "hallucinated_argument"  # an argument the tool's schema does not define
MISSING_REQUIRED = "missing_required"  # an argument the tool's schema requires was omitted
ENUM_CASE = "enum_case"                # an enum value differing only in letter case
TYPE_ERROR = "type_error"              # a value of the wrong JSON type for its schema
INVALID_ARGUMENTS = "invalid_arguments"  # arguments not decodable as a JSON object (strictly)

# An unparseable answer also carries why (ParsedAnswer.error_code: malformed_reply,
# truncated, refusal...; bench.parse.ANSWER_ERROR_CODES), next to UNPARSEABLE.
ERROR_CODES = (UNPARSEABLE, FALSE_NO_CALL, FALSE_CALL, WRONG_TOOL, MISSING_CALL, EXTRA_CALL,
               HALLUCINATED_TOOL, WRONG_VALUE, MISSING_ARGUMENT, UNEXPECTED_ARGUMENT,
               SCHEMA_INVALID, HALLUCINATED_ARGUMENT, MISSING_REQUIRED, ENUM_CASE, TYPE_ERROR,
               INVALID_ARGUMENTS, *ANSWER_ERROR_CODES)

# Lenient repairs (``CaseScore.lenient_repairs`` entries end with one of these).
# The value repairs are :func:`bench.parse.repair_arguments`'s (shared with the executor).
REPAIR_DOUBLE_ENCODED = "double_encoded"      # arguments were a JSON string inside a JSON string
REPAIRS = (REPAIR_DOUBLE_ENCODED, REPAIR_STRING_NUMBER, REPAIR_ENUM_CASE, REPAIR_JSON_STRING,
           REPAIR_STRING_BOOLEAN)
