// Package python holds no Go code of its own: this folder is the Python client of opsq
// (pyproject.toml, opsq/), and python_test.go runs its unittest suite (tests/) against
// real "opsq serve" processes on a real PostgreSQL, so that "make test" (go test ./...)
// runs it, and checks that "pip install ./client/python" works in a fresh venv.
package python
