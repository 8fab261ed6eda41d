"""What envsnap knows besides what the snapshots show: the field rules (rules.py: ONE table of category,
component, prior, volatility and why per key, collectors' own rules included), the lookup of a key's rule
(matching.py), the evidence tables the ranking reads (evidence.py: context, native readers, run counters),
what an unknown difference looks like (variables.py) and what a change of an installed build means (builds.py).

This package's face: callers write `knowledge.rule_for(key)`; the names below are its whole API.
"""
from envsnap.analysis.knowledge.builds import (
    BUILD_CHANGES,
    MISSING_COMPILED,
    REPLACED_COMPILED,
    BuildChange,
    build_change,
    build_identity,
    build_summary,
)
from envsnap.analysis.knowledge.evidence import (
    BUSY_CPUS,
    CPU_SET,
    CUDA_CONTEXT,
    GPU_CONTEXT,
    LOADED_BY_PART,
    NATIVE_READERS,
    NCCL_CONTEXT,
    PEAK_THREADS,
    REQUIREMENTS,
    SERIES_LINKS,
    SGLANG_CONTEXT,
    THREADS_CONTEXT,
    Requirement,
    SeriesLink,
    native_reader,
    requirement_for,
    series_link,
)
from envsnap.analysis.knowledge.matching import (
    glob_matcher,
    is_performance_variable,
    is_volatile,
    rule_for,
    rule_for_variable,
)
from envsnap.analysis.knowledge.rules import (
    CROSS_SECTION_RULES,
    ENGINE_SET_ENV,
    HOT_PATH_PACKAGES,
    KNOWLEDGE_RULES,
    VALUE_CASES,
    VOLATILE_RULES,
    ValueCase,
    all_rules,
    section_category,
    section_compares,
    section_fields,
    section_rules,
    value_case,
)
from envsnap.analysis.knowledge.variables import (
    CPU_SIZED,
    DOCUMENTATION_NAMES,
    FILE_KINDS,
    KNOB_FREE_FAMILIES,
    MEMORY_SIZED,
    NAME_FAMILIES,
    NEIGHBOUR_SIZED,
    PATH_SETTING_FAMILIES,
    RESOURCE_KEYS,
    SMT_OFF_PRIOR,
    SMT_OTHER_PRIOR,
    VARIABLE_KINDS,
    SizedPrior,
    VariableKind,
)
from envsnap.model.rules import (
    COMMUNICATION,
    CPU_HOST,
    DRAFTER,
    GRAPHS,
    KERNELS,
    MEMORY,
    NONE,
    FieldRule,
    SectionRules,
)

__all__ = [
    "BUILD_CHANGES", "BUSY_CPUS", "BuildChange", "COMMUNICATION", "CPU_HOST", "CPU_SET", "CPU_SIZED",
    "CROSS_SECTION_RULES", "CUDA_CONTEXT", "DOCUMENTATION_NAMES", "DRAFTER", "ENGINE_SET_ENV", "FILE_KINDS",
    "FieldRule", "GPU_CONTEXT", "GRAPHS", "HOT_PATH_PACKAGES", "KERNELS", "KNOB_FREE_FAMILIES", "KNOWLEDGE_RULES",
    "LOADED_BY_PART", "MEMORY", "MEMORY_SIZED", "MISSING_COMPILED", "NAME_FAMILIES", "NATIVE_READERS",
    "NCCL_CONTEXT", "NEIGHBOUR_SIZED", "NONE", "PATH_SETTING_FAMILIES", "PEAK_THREADS", "REPLACED_COMPILED",
    "REQUIREMENTS", "RESOURCE_KEYS", "Requirement", "SERIES_LINKS", "SGLANG_CONTEXT", "SMT_OFF_PRIOR",
    "SMT_OTHER_PRIOR", "SectionRules", "SeriesLink", "SizedPrior", "THREADS_CONTEXT", "VALUE_CASES",
    "VARIABLE_KINDS", "VOLATILE_RULES", "ValueCase", "VariableKind", "all_rules", "build_change", "build_identity",
    "build_summary", "glob_matcher", "is_performance_variable", "is_volatile", "native_reader", "requirement_for",
    "rule_for", "rule_for_variable", "section_category", "section_compares", "section_fields", "section_rules",
    "series_link", "value_case",
]
