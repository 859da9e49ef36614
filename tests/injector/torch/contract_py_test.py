"""fpscope_write_contract_py: the tool that writes the PyTorch front end's Python files from their
templates, with the values of the C and C++ headers.

    contract_py_test.py --tool PATH [unittest arguments]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

TOOL = None


class WriteContractPyTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="fpscope-contract-py-")
        self.addCleanup(shutil.rmtree, self.dir)

    def run_tool(self, template_text):
        template = os.path.join(self.dir, "t.py.in")
        output = os.path.join(self.dir, "t.py")
        with open(template, "w") as f:
            f.write(template_text)
        p = subprocess.run([TOOL, template, output], capture_output=True, text=True)
        return p, output

    def test_names_become_the_headers_values_and_the_rest_is_kept(self):
        p, output = self.run_tool(
            "@property\n"                        # an '@' of Python's own is kept
            "X = @MAX_DIMS@  # a @ b\n"
            "P = @PHASE_BACKWARD@\n"
            "E = @ENV_RING@\n"
            "F = @TENSOR_FORMAT@\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(output) as f:
            text = f.read()
        self.assertEqual(text, '@property\nX = 6  # a @ b\nP = "backward"\nE = "FPSCOPE_RING"\n'
                               'F = "<QQQ6qiiii"\n')
        self.assertEqual(sorted(os.listdir(self.dir)), ["t.py", "t.py.in"])  # no temporary left

    def test_a_name_no_header_states_stops_the_build_and_writes_nothing(self):
        p, output = self.run_tool("X = @NOT_A_FACT@\n")
        self.assertEqual(p.returncode, 1)
        self.assertIn("@NOT_A_FACT@", p.stderr)
        self.assertFalse(os.path.exists(output))
        self.assertFalse(os.path.exists(output + ".tmp"))

    def test_a_missing_template_and_a_bad_command_line_say_so(self):
        p = subprocess.run([TOOL, os.path.join(self.dir, "absent.in"), os.path.join(self.dir, "o")],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 1)
        self.assertIn("cannot read", p.stderr)
        p = subprocess.run([TOOL], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("usage", p.stderr)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    known, rest = parser.parse_known_args()
    TOOL = os.path.abspath(known.tool)
    program = unittest.main(argv=[sys.argv[0]] + rest, exit=False)
    sys.exit(0 if program.result.wasSuccessful() else 1)
