#===- check_model.py - onnx.checker for the fuzz driver -------------------===#
#
# Reads model paths, one a line, on stdin and answers each with one JSON line
# {"ok": bool, "error": str}: onnx.checker.check_model(path, full_check=True)
# of the interpreter running this script (fuzz_importer.py --checker PYTHON).
#
#===-----------------------------------------------------------------------===#

import json
import sys

import onnx
import onnx.checker

for line in sys.stdin:
    path = line.rstrip("\n")
    try:
        onnx.checker.check_model(path, full_check=True)
        answer = {"ok": True, "error": ""}
    except Exception as e:  # the checker's own errors and protobuf's
        text = " ".join(str(e).split())
        answer = {"ok": False, "error": "%s: %s" % (type(e).__name__, text)}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
