"""Every JVM name is spelled once in Python (sparkrecover/jvm/__init__.py), and each setting the
Java classes read is spelled there as the Java constant that reads it."""

from __future__ import annotations

import os
import re

from sparkrecover import jvm

PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JVM_FOLDER = os.path.join(PACKAGE, "sparkrecover", "jvm")
# (Python constant, Java file, Java constant)
READ_BY_JAVA = [
    ("KEPT_DIR_CONF", "commit/ResumingCommitProtocol.java", "KEPT_DIR"),
    ("KEPT_PARTITIONS_CONF", "commit/ResumingCommitProtocol.java", "KEPT_PARTITIONS"),
    ("KEPT_JOB_CONF", "commit/FencedCommitProtocol.java", "KEPT_JOB"),
    ("FACTORY_COMMITTER_CONF", "commit/FencedCommitProtocol.java", "FACTORY_COMMITTER"),
    ("MAGIC_COMMITTER", "commit/FencedCommitProtocol.java", "MAGIC_COMMITTER"),
    ("SHUFFLE_DIR_CONF", "shuffle/KeepingShuffleManager.java", "DIR"),
    ("SHUFFLE_MODE_CONF", "shuffle/KeepingShuffleManager.java", "MODE"),
    ("SHUFFLE_SCRIPT_CONF", "shuffle/KeepingShuffleManager.java", "SCRIPT"),
    ("SHUFFLE_REUSE_CONF", "shuffle/KeepingShuffleManager.java", "REUSE"),
    ("SHUFFLE_SERVE_CONF", "shuffle/KeepingShuffleDataIO.java", "SERVE"),
    ("WRITING_PROPERTY", "bridge/SparkRecoverListener.java", "WRITING_PROPERTY"),
    ("KEPT_PROPERTY", "bridge/SparkRecoverListener.java", "KEPT_PROPERTY"),
]


def java_constant(file: str, name: str) -> str:
    text = open(os.path.join(JVM_FOLDER, file), encoding="utf-8").read()
    found = re.search(rf'static final String {name} = "([^"]+)";', text)
    assert found, f"{file} has no constant {name}"
    return found.group(1)


def test_each_setting_a_java_class_reads_is_the_one_python_sets():
    for python, file, java in READ_BY_JAVA:
        assert getattr(jvm, python) == java_constant(file, java), python


def class_of(path: str) -> str:
    """The class a source under sparkrecover/jvm/ defines, by its place: jvm/commit/X.java is
    sparkrecover.jvm.commit.X."""
    return "sparkrecover.jvm." + os.path.relpath(path, JVM_FOLDER)[: -len(".java")].replace(os.sep, ".")


def test_each_class_name_names_a_shipped_source():
    shipped = {class_of(path) for path in jvm.sources()}
    classes = [value for name, value in vars(jvm).items() if name.endswith("_CLASS")]
    assert len(classes) == 10  # a new class Python names must be added here too
    for name in classes:
        assert name in shipped, name


def test_each_source_declares_the_package_of_its_folder():
    """javac does not hold a source to its folder; the cache key, the docs and this test do."""
    for path in jvm.sources():
        package = class_of(path).rpartition(".")[0]
        text = open(path, encoding="utf-8").read()
        assert f"package {package};" in text, path
    assert {class_of(path).rsplit(".", 2)[1] for path in jvm.sources()} == {"bridge", "commit", "shuffle"}


def python_files_spelling(pattern: re.Pattern[str]) -> list[str]:
    found = []
    top = os.path.join(PACKAGE, "sparkrecover")
    for folder, _, names in os.walk(top):
        for name in names:
            path = os.path.join(folder, name)
            if name.endswith(".py") and path != os.path.join(JVM_FOLDER, "__init__.py"):
                text = open(path, encoding="utf-8").read()
                found += [f"{os.path.relpath(path, top)}: {hit}" for hit in pattern.findall(text)]
    return found


def test_no_other_module_spells_a_jvm_class_or_one_of_its_settings():
    spelled = re.compile(
        r"""["'](sparkrecover\.jvm\.\w+|(?:spark\.)?sparkrecover\.(?:kept|shuffle|writing|commit)(?:\.\w+)?)["']"""
    )
    assert python_files_spelling(spelled) == []
