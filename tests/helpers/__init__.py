"""Helpers the tests share: servers to run, payloads to send, generators of rule tests.

They are a package imported as ``tests.helpers.<module>`` from the repository's root (the
one ``pythonpath`` entry, ``"."``, in pyproject.toml), so an import names where the helper
lives, works the same from every test folder, under pytest's default ``prepend`` import
mode as under ``importlib``, and in each pytest-xdist worker (each starts in the rootdir
with the same ``sys.path``). ``tests`` itself stays a namespace package (no
``__init__.py``): the test modules keep their basenames and folders' conftests their own.
Modules keep the ``<folder>_<what>.py`` names they had beside the tests that use them most.
"""
