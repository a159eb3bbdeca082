"""Bad and edge inputs for every public function of snippets/, sitekit/figures.py and the widgets (issue 10 §6).

The contract of the library code: every public function either returns a
finite result, or raises ValueError or TypeError with a clear message, one
that names the argument that is wrong and says what was given and what was
expected (``clear_error_gaps``). No other exception, no warning, no NaN or
infinity out of finite input, and no result at all out of NaN or an infinity (one
anywhere in an input must be refused, never averaged into an answer, squashed
by tanh or silently dropped; the few arguments that take -inf on purpose, the
scores of a softmax, are listed in ``MINUS_INF_ALLOWED``), out of a string
where anything but a string is expected (``"abc"`` is no list of three
tokens), or out of a set where a list is expected (a set has no order).
Sizes as large as 10**30 get the same clear errors, not NumPy's.

Nothing here is written per function. The test finds every public function
(and every public method of every public class) of every module of snippets/,
of sitekit/figures.py and of sitekit/widgets/ (what pages call with data) by
itself, modules added later included, and takes a valid call of each from
the ``>>>`` example of its docstring (issue 9 asks every public function for
one): the example runs with the function wrapped, and the first call that
returns is the baseline. Then each argument in turn, the others kept, is
replaced by bad and edge values chosen from its baseline value: NaN, ±inf,
huge and tiny numbers, wrong numbers of dimensions, mismatched and empty
shapes, other dtypes, None, strings, sets, zero, negative, non-integer and
huge sizes, missing dictionary keys. Two passes:

- every replacement of a fixed list, for every argument (exhaustive);
- Hypothesis, derandomized: random arrays of random shapes and dtypes,
  random numbers and odd objects, for a random argument.

The number of calls made is printed at the end of the module's tests.
"""

from __future__ import annotations

import contextlib
import copy
import doctest
import importlib
import inspect
import io
import numbers
import pkgutil
import re
import threading
import warnings
from collections.abc import Mapping

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import sitekit.widgets
import snippets

CALLS = {"exhaustive": 0, "hypothesis": 0}
HYPOTHESIS_EXAMPLES = 25          # per function: the same count on every run


# --- Discovery ----------------------------------------------------------------


def module_names() -> list[str]:
    """Dotted names: the library's modules, the figures, the widgets."""
    found = ["sitekit.figures"]
    for package in (snippets, sitekit.widgets):
        found += [f"{package.__name__}.{info.name}" for info in pkgutil.iter_modules(package.__path__)
                  if not info.name.startswith("_")]
    return sorted(found, key=lambda name: name.rsplit(".", 1)[-1])


def public_callables():
    """(test id, module, callable, class or None, method name or None) for every public function and method."""
    found = []
    for dotted in module_names():
        name = dotted.rsplit(".", 1)[-1]  # test ids as before the site's modules left snippets/
        try:
            module = importlib.import_module(dotted)
        except Exception as error:  # a module that does not import fails its own test below
            found.append((f"{name}:import", name, error, None, None))
            continue
        for attr, obj in sorted(vars(module).items()):
            if attr.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(obj):
                found.append((f"{name}.{attr}", module, obj, None, None))
            elif inspect.isclass(obj) and not issubclass(obj, BaseException):
                found.append((f"{name}.{attr}", module, obj, obj, None))
                for method, function in sorted(vars(obj).items()):
                    if not method.startswith("_") and inspect.isfunction(function):
                        found.append((f"{name}.{attr}.{method}", module, function, obj, method))
    return found


CALLABLES = public_callables()


def example_sources(module, function, cls, method) -> list[list[str]]:
    """The >>> examples that may call the function: its own docstring's, then its class's."""
    docs = [inspect.getdoc(function) or ""]
    if cls is not None:
        docs.append(inspect.getdoc(cls) or "")
        if method is None:  # a constructor is called in its methods' examples too
            docs += [inspect.getdoc(f) or "" for f in vars(cls).values() if inspect.isfunction(f)]
    parser = doctest.DocTestParser()
    return [[example.source for example in parser.get_examples(doc)] for doc in docs if doc]


def baseline_call(module, function, cls, method):
    """(args, kwargs) of the first call of ``function`` in its examples that returned, or None.

    For a method, args[0] is the instance (copied before the call).
    """
    recorded = []

    def recorder(*args, **kwargs):
        snapshot = (safe_copy(args), safe_copy(kwargs))
        result = (cls if cls is not None and method is None else function)(*args, **kwargs)
        if not recorded:
            recorded.append(snapshot)
        return result

    for sources in example_sources(module, function, cls, method):
        globs = dict(vars(module))
        if cls is None:
            globs[function.__name__] = recorder
        elif method is None:
            globs[cls.__name__] = recorder
        with contextlib.ExitStack() as stack:
            if method is not None:
                setattr(cls, method, recorder)
                stack.callback(setattr, cls, method, function)
            stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
            stack.enter_context(warnings.catch_warnings())
            warnings.simplefilter("ignore")
            for source in sources:
                with contextlib.suppress(Exception):  # an example may show an error on purpose
                    exec(compile(source, "<example>", "single"), globs)
        if recorded:
            return recorded[0]
    return None


def safe_copy(value):
    """A deep copy of an argument; matplotlib figures, and what cannot be copied, are shared."""
    if type(value).__module__.startswith("matplotlib"):
        return value
    if isinstance(value, dict):
        return {key: safe_copy(item) for key, item in value.items()}
    if type(value) in (list, tuple):
        return type(value)(safe_copy(item) for item in value)
    try:
        return copy.deepcopy(value)
    except Exception:
        return value


# --- The contract -------------------------------------------------------------


def is_finite(result, depth: int = 0) -> bool:
    """True if every number in the result is finite (arrays, numbers, containers, object attributes)."""
    if depth > 4 or result is None or isinstance(result, (str, bytes, bool, np.bool_)):
        return True
    if isinstance(result, np.ndarray):
        if result.dtype.kind in "fc":
            return bool(np.isfinite(result).all())
        if result.dtype.kind == "O":
            return all(is_finite(x, depth + 1) for x in result.ravel())
        return True
    if isinstance(result, numbers.Integral):   # a Python int is exact at any size
        return True
    if isinstance(result, numbers.Number):
        return bool(np.isfinite(result))
    if isinstance(result, Mapping):
        return all(is_finite(v, depth + 1) for v in result.values())
    if isinstance(result, (list, tuple, set, frozenset)):
        return all(is_finite(v, depth + 1) for v in result)
    if hasattr(result, "__dict__") and not type(result).__module__.startswith(("matplotlib", "numpy")):
        return all(is_finite(v, depth + 1) for v in vars(result).values())
    return True


def holds(value, test) -> bool:
    """True if ``test`` (np.isnan, np.isposinf, np.isneginf) holds for a number in the value.

    Looks into floats, float arrays and a dict's values; not into lists, whose
    items may be tokens (any hashable value, ``float("inf")`` included).
    """
    if isinstance(value, np.complexfloating) or (isinstance(value, np.ndarray) and value.dtype.kind == "c"):
        return holds(np.real(value), test) or holds(np.imag(value), test)
    if isinstance(value, (float, np.floating)) or (isinstance(value, np.ndarray) and value.dtype.kind == "f"):
        return bool(np.any(test(value)))
    if isinstance(value, Mapping):
        return any(holds(v, test) for v in value.values())
    return False


# Arguments that take -inf on purpose: a score of -inf is a masked entry, of weight 0.
MINUS_INF_ALLOWED = {("attention.softmax", "x"), ("no_match.softmax_one", "x")}


def must_refuse(test_id: str, name: str, bad, baseline) -> str | None:
    """Why passing ``bad`` for the argument ``name`` (valid: ``baseline``) must raise, or None."""
    if holds(bad, np.isnan):
        return "NaN in"
    if holds(bad, np.isposinf) or ((test_id, name) not in MINUS_INF_ALLOWED and holds(bad, np.isneginf)):
        return "an infinity in"
    if isinstance(bad, (str, bytes)) and not isinstance(baseline, (str, bytes)):
        return "a string in place of a non-string"
    if isinstance(bad, (set, frozenset)) and isinstance(baseline, (list, tuple)):
        return "a set (no order) in place of a list"
    return None


def names_pattern(names) -> str:
    """A regular expression matching any of ``names`` as a whole word (``Q`` in "Q (3, 4)", not in "QK")."""
    words = "|".join(re.escape(name) for name in names)
    return rf"(?<![A-Za-z0-9_])(?:{words})(?![A-Za-z0-9_])"


# What was given: a value shown after "got", a shape or dtype, or the word for what is wrong with it.
GIVEN = re.compile(
    r"\b(?:got|given|received|passed|found)\s+\S"                    # got 0, got an array of dtype <U32
    r"|\b(?:has|have|of)\s+(?:shape|dtype|length|size|type|ndim)\b"  # has shape (7,), of dtype object
    r"|\blargest \|entry\| [-+\d]"                                  # Q (largest |entry| 1.8e+308)
    r"|\b(?:has|have|holds?) no\b"                                   # text holds no tokens
    r"|\b(?:contains?|lacks?|missing|unknown|unexpected|is empty|empty|repeats?|repeated|duplicated?)\b")
# The argument stated with its value, after its name (and a [key], or a product "·d_index"):
# " = 3", " (3, 7)", " 1e-308", " has T = 10", " has 8 columns", " is '3'".
STATED = (r"(?:\[[^\]]*\])*(?:\s*[×·*/+-]\s*\w+)*"
          r"(?:\s*=\s*\S|\s*\(|\s+[-+]?\d|\s+(?:has|holds|is|are)\s+(?:\w+\s*=\s*)?[-\d(\['\"])")
# What was expected: a requirement, a bound or the allowed values.
EXPECTED = re.compile(
    r"\b(?:must|expected|expects?|should|needs?|only|at least|at most|one of|requires?|cannot|allowed"
    r"|divisible|divide|within|between|broadcasts? to|too (?:large|small|long|short|many|few)"
    r"|(?:more|fewer|less|longer|shorter|larger|smaller|greater) than)\b")


def clear_error_gaps(message: str, names) -> list[str]:
    """What a clear error message says and ``message`` leaves out: [] if it is clear.

    Clear (the project's standard): it names the argument (one of ``names``),
    says what was given (its value, type, shape or dtype, or what is wrong with
    it) and what was expected. The argument stated with a value counts as
    given: ``n_heads = 3``, ``x_q (3, 7)``, ``n_index·d_index = 3·4``,
    ``tokens has T = 10``.

    >>> clear_error_gaps("n_heads = 3 must divide d_model = 8", {"n_heads"})
    []
    >>> clear_error_gaps("Q must be a 2-D array of floats, got a str", {"Q"})
    []
    >>> clear_error_gaps("K contains NaN: expected finite numbers", {"K"})
    []
    >>> clear_error_gaps("bad Q", {"Q"})
    ['what was given', 'what was expected']
    >>> clear_error_gaps("Q", {"Q"})
    ['what was given', 'what was expected']
    >>> clear_error_gaps("Q must be a matrix", {"Q"})
    ['what was given']
    >>> clear_error_gaps("the vocabulary has repeated tokens: ['a', 'a']", {"tokens"})
    ['what was expected']
    >>> clear_error_gaps("operands could not be broadcast together with shapes (2,3) (4,3) ", {"Q", "K"})
    ['the argument', 'what was given', 'what was expected']
    >>> clear_error_gaps("could not convert string to float: 'abc'", {"x"})
    ['the argument', 'what was given', 'what was expected']
    """
    name = names_pattern(names)
    gaps = [] if re.search(name, message) else ["the argument"]
    if not (GIVEN.search(message) or re.search(name + STATED, message)):
        gaps.append("what was given")
    if not EXPECTED.search(message):
        gaps.append("what was expected")
    return gaps


@contextlib.contextmanager
def warnings_of_this_thread():
    """Record the warnings this thread raises, as ``catch_warnings(record=True)`` does, and only those.

    Python's warning filters are one for the whole process: in the full suite
    the browser's and the background jobs' threads run beside this test, and a
    warning one of them raised in the meantime must not count as the call's
    (it goes where it would have gone, pytest's own capture).
    """
    caught, mine = [], threading.get_ident()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        others = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if threading.get_ident() == mine:
                caught.append(warnings.WarningMessage(message, category, filename, lineno, file, line))
            else:
                others(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield caught


def check_call(function, kwargs, blamed: set[str], label: str, refuse: str | None = None) -> str | None:
    """Call and judge: a description of the broken contract, or None if it is kept.

    ``refuse``: why the input must be refused (see ``must_refuse``), so a result breaks the contract.
    """
    # NumPy's default error state (underflow is silent, as it is for every user).
    with warnings_of_this_thread() as caught, np.errstate(over="warn", divide="warn", invalid="warn",
                                                          under="ignore"):
        try:
            result = function(**kwargs)
        except (ValueError, TypeError) as error:
            if caught:
                return f"{label}: warned {caught[0].category.__name__}: {caught[0].message}"
            gaps = clear_error_gaps(str(error), blamed)
            if gaps:
                return (f"{label}: {type(error).__name__} does not say {' or '.join(gaps)} "
                        f"(the argument: {' or '.join(sorted(blamed))}): {error}")
            return None
        except Exception as error:
            return f"{label}: raised {type(error).__name__}: {str(error)[:200]}"
    if caught:
        return f"{label}: warned {caught[0].category.__name__}: {caught[0].message}"
    if not is_finite(result):
        return f"{label}: returned NaN or inf"
    if refuse:
        return f"{label}: {refuse}, yet a result came out (expected an error naming {sorted(blamed)})"
    return None


# --- Bad values, chosen from a baseline value ---------------------------------


def numeric_array(value):
    """``value`` as a numeric array if it is one (an ndarray, or a list of numbers), else None."""
    if isinstance(value, (str, bytes, Mapping)) or value is None or isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, numbers.Number):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            array = np.asarray(value)
    except Exception:
        return None
    return array if array.dtype.kind in "biuf" and array.ndim >= 1 else None


def array_mutations(a: np.ndarray):
    """(label, bad array) pairs for a numeric array ``a``."""
    out = []
    f = a.astype(np.float64)
    if a.dtype == bool:
        out += [("all False", np.zeros_like(a)), ("all True", np.ones_like(a)),
                ("as int", a.astype(np.int64)), ("as float", f)]
    else:
        if a.size:
            for label, fill in (("NaN", np.nan), ("+inf", np.inf), ("-inf", -np.inf)):
                one = f.copy()
                one.flat[0] = fill
                out.append((f"one {label}", one))
            out.append(("all NaN", np.full(a.shape, np.nan)))
        out += [("huge 1e300", np.full(a.shape, 1e300)), ("largest float", np.full(a.shape, np.finfo(float).max)),
                ("1e154 times", f * 1e154), ("tiny 1e-300 times", f * 1e-300), ("subnormal", np.full(a.shape, 5e-324)),
                ("zeros", np.zeros(a.shape)), ("negated", -f), ("plus 1000", f + 1000),
                ("int64", a.astype(np.int64)), ("bool", a != 0), ("float16", f.astype(np.float16)),
                ("float32", f.astype(np.float32)), ("float16 values 100", np.full(a.shape, 100, np.float16)),
                ("complex", f.astype(complex)), ("object", f.astype(object)), ("strings", f.astype(str))]
    out += [("one more axis", a[None]), ("a scalar", a.ravel()[0] if a.size else np.float64(1.0))]
    if a.ndim > 1:
        out += [("flattened", a.reshape(-1)), ("first row only", a[0])]
    for axis in range(a.ndim):
        if a.shape[axis] > 1:
            out.append((f"one fewer along axis {axis}", np.delete(a, -1, axis=axis)))
        out.append((f"one more along axis {axis}", np.concatenate([a, np.take(a, [0], axis=axis)], axis=axis)
                    if a.shape[axis] else np.ones(a.shape[:axis] + (1,) + a.shape[axis + 1:], a.dtype)))
        out.append((f"empty along axis {axis}", np.take(a, [], axis=axis)))
    out += [("None", None), ("a string", "abc"), ("empty list", []), ("ragged list", [[1.0, 2.0], [3.0]])]
    return out


INT_MUTATIONS = [("zero", 0), ("-1", -1), ("2.5", 2.5), ("True", True), ("None", None), ("'3'", "3"),
                 ("NaN", float("nan")), ("inf", float("inf")), ("a list", [2]), ("3", 3), ("7", 7),
                 ("10**30", 10**30), ("2**63", 2**63), ("np.int64 max", np.iinfo(np.int64).max),
                 ("np.int64(2**62)", np.int64(2**62))]
FLOAT_MUTATIONS = [("NaN", float("nan")), ("+inf", float("inf")), ("-inf", float("-inf")), ("zero", 0.0),
                   ("-1", -1.0), ("1e308", 1e308), ("largest float", float(np.finfo(float).max)),
                   ("1e-308", 1e-308), ("5e-324", 5e-324), ("True", True),
                   ("None", None), ("'1.0'", "1.0"), ("1j", 1j), ("an array", np.array([1.0, 2.0])),
                   ("np.float32", np.float32(0.5)), ("np.nan", np.float64("nan"))]
GENERIC_MUTATIONS = [("NaN", float("nan")), ("inf", float("inf")), ("'abc'", "abc"), ("-1", -1), ("0", 0),
                     ("2.5", 2.5), ("10**30", 10**30), ("largest float", float(np.finfo(float).max)),
                     ("-1e308", -1e308), ("True", True), ("a float matrix", np.ones((2, 2))),
                     ("a bool matrix (7, 7)", np.ones((7, 7), bool)), ("a bool scalar False", np.array(False)),
                     ("empty list", []), ("an object", object())]


def mutations(value):
    """(label, bad value, extra names the error may blame) for one baseline value."""
    if isinstance(value, (bool, np.bool_)):
        return [(label, v, ()) for label, v in [("None", None), ("'yes'", "yes"), ("2", 2), ("NaN", float("nan"))]]
    if isinstance(value, numbers.Integral):
        return [(label, v, ()) for label, v in INT_MUTATIONS]
    if isinstance(value, numbers.Real):
        return [(label, v, ()) for label, v in FLOAT_MUTATIONS]
    if value is None:
        return [(label, v, ()) for label, v in GENERIC_MUTATIONS]
    if isinstance(value, str):
        return [(label, v, ()) for label, v in [("empty", ""), ("blank", "   "), ("None", None), ("5", 5),
                                                ("bytes", b"x")]]
    if isinstance(value, np.random.Generator):
        return [(label, v, ()) for label, v in [("None", None), ("seed 0", 0), ("'seed'", "seed"),
                                                ("RandomState", np.random.RandomState(0))]]
    if isinstance(value, Mapping):
        out = [("empty dict", {}, ()), ("a list", list(value.items()), ()), ("None", None, ())]
        for key in value:
            out.append((f"without {key!r}", {k: v for k, v in value.items() if k != key}, (str(key),)))
            inner = numeric_array(value[key])
            inner_bad = array_mutations(inner) if inner is not None else [(label, v) for label, v, _ in
                                                                            mutations(value[key])]
            keep = ("one NaN", "all NaN", "one +inf", "huge 1e300", "one fewer along axis 0", "one more axis",
                    "strings", "None", "a string", "NaN", "complex", "empty along axis 0", "float16")
            for label, bad in inner_bad:
                if label in keep:
                    out.append((f"[{key!r}] {label}", {**value, key: bad}, (str(key),)))
        return out
    array = numeric_array(value)
    if array is not None:
        return [(label, v, ()) for label, v in array_mutations(array)]
    if isinstance(value, (list, tuple)):
        repeated = [value[0]] * 2 if value else [1, 1]
        out = [("None", None), ("5", 5), ("empty", type(value)()), ("unhashable items", [[1], [2]]),
               ("repeated", repeated), ("a string", "abc"), ("one item's string", "".join(map(str, value[:1]))),
               ("bytes", b"abc")]
        with contextlib.suppress(TypeError):   # unhashable items: no set
            out.append(("a set", set(value)))
        return [(label, v, ()) for label, v in out]
    return [(label, v, ()) for label, v in [("None", None), ("'abc'", "abc"), ("5", 5), ("an object", object())]]


# --- Random values for Hypothesis ---------------------------------------------

FLOAT_ELEMENTS = st.floats(allow_nan=True, allow_infinity=True, width=64)
RANDOM_ARRAYS = hnp.arrays(
    dtype=st.sampled_from([np.float64, np.float32, np.float16, np.int64, np.bool_, np.complex128]),
    shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4),
    elements=None,
)
RANDOM_FLOAT_ARRAYS = hnp.arrays(
    dtype=np.float64, shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5), elements=FLOAT_ELEMENTS,
)
RANDOM_VALUES = st.one_of(
    RANDOM_ARRAYS, RANDOM_FLOAT_ARRAYS, FLOAT_ELEMENTS, st.integers(-3, 12), st.sampled_from([10**30, 2**63]),
    st.none(), st.booleans(),
    st.text(max_size=3), st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=4),
    st.complex_numbers(max_magnitude=10),
)


# --- The tests ----------------------------------------------------------------


def baseline_arguments(function, cls, method, call):
    """The baseline's arguments by name (defaults included) and, for a method, the instance."""
    args, kwargs = call
    signature = inspect.signature(cls if cls is not None and method is None else function)
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    parameters = {name: value for name, value in bound.arguments.items()
                  if signature.parameters[name].kind not in variadic}
    instance = None
    if method is not None:  # the first parameter is self
        instance = parameters.pop(next(iter(signature.parameters)))
    return parameters, instance


def make_call(function, cls, method, instance, parameters):
    """The callable and fresh copies of the arguments (a function may close or change what it gets)."""
    if method is not None:
        return getattr(safe_copy(instance), method), safe_copy(parameters)
    return (cls if cls is not None else function), safe_copy(parameters)


@pytest.fixture(scope="module", autouse=True)
def report_counts(request):
    yield
    line = (f"\ntest_bad_input: {CALLS['exhaustive']} exhaustive calls and {CALLS['hypothesis']} Hypothesis "
            f"examples over {len(CALLABLES)} public functions and methods")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print(line)


@pytest.mark.parametrize(("test_id", "module", "function", "cls", "method"), CALLABLES,
                         ids=[entry[0] for entry in CALLABLES])
def test_bad_input_gives_a_finite_result_or_a_clear_error(test_id, module, function, cls, method):
    if test_id.endswith(":import"):
        pytest.fail(f"snippets.{module} does not import: {function!r}")
    call = baseline_call(module, function, cls, method)
    assert call is not None, (
        f"{test_id}: no >>> example in its docstring calls it (issue 9 asks for one; "
        "this test takes its valid arguments from it)")
    parameters, instance = baseline_arguments(function, cls, method, call)
    problem = check_call(*make_call(function, cls, method, instance, parameters), {"<none>"},
                         f"{test_id} with its example's arguments")
    assert problem is None, problem

    failures = []
    for name, value in parameters.items():
        for label, bad, extra_names in mutations(value):
            target, kwargs = make_call(function, cls, method, instance, parameters)
            kwargs[name] = bad
            CALLS["exhaustive"] += 1
            problem = check_call(target, kwargs, {name, *extra_names}, f"{name} = {label}",
                                 must_refuse(test_id, name, bad, value))
            if problem:
                failures.append(problem)
    assert not failures, f"{test_id}: {len(failures)} broken calls:\n" + "\n".join(failures[:25])

    if not parameters:
        return

    @settings(max_examples=HYPOTHESIS_EXAMPLES, derandomize=True, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(name=st.sampled_from(sorted(parameters)), bad=RANDOM_VALUES)
    def fuzz(name, bad):
        target, kwargs = make_call(function, cls, method, instance, parameters)
        kwargs[name] = bad
        CALLS["hypothesis"] += 1
        problem = check_call(target, kwargs, {name}, f"{name} = {bad!r:.120}",
                             must_refuse(test_id, name, bad, parameters[name]))
        assert problem is None, f"{test_id}: {problem}"

    fuzz()


# --- The holes found by hand (issue 18), each named -----------------------------

def _issue_18_cases():
    from snippets.at_scale import chunked_attention, topk_attention
    from snippets.attention import additive_scores, scaled_dot_product_attention, softmax
    from snippets.induction import induction_model
    from snippets.lookup import OneHotVocabulary
    from snippets.multihead import causal_mask, init_params, padding_mask
    from snippets.positions import sinusoidal_positions

    Q, K, V = np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 2))
    W_Q, W_K, w_v = np.ones((3, 5)), np.ones((3, 5)), np.ones(5)
    rng = np.random.default_rng(0)
    key = np.array([[1.0, 0.0, 0.0]])           # one query, so an infinite key scores -inf, not NaN
    minus_inf_key = np.vstack([[-np.inf, 0.0, 0.0], K[1:]])
    cases = []
    for name in ("Q", "K", "W_Q", "W_K"):
        for sign in (1, -1):
            arrays = {"Q": Q, "K": K, "W_Q": W_Q, "W_K": W_K}
            arrays[name] = arrays[name].copy()
            arrays[name][0, 0] = sign * np.inf
            cases.append((f"additive_scores {name} {sign:+}inf", ValueError, rf"additive_scores: {name} contains",
                          lambda a=arrays: additive_scores(a["Q"], a["K"], a["W_Q"], a["W_K"], w_v)))
    cases += [
        ("OneHotVocabulary str", TypeError, r"tokens must be a list of tokens, got the str 'abc'",
         lambda: OneHotVocabulary("abc")),
        ("OneHotVocabulary set", TypeError, r"tokens must be a list of tokens, in order, got a set",
         lambda: OneHotVocabulary({"a", "b"})),
        ("encode_all str", TypeError, r"tokens must be a list of tokens, got the str 'ab'",
         lambda: OneHotVocabulary(["a", "b"]).encode_all("ab")),
        ("causal_mask 10**30", ValueError, r"^T = 10{30}: too large", lambda: causal_mask(10**30)),
        ("padding_mask 10**30", ValueError, r"^S = 10{30}: too large", lambda: padding_mask([1], 10**30)),
        ("init_params d_model", ValueError, r"^d_model = 10{30}: too large", lambda: init_params(10**30, 2, rng)),
        ("init_params d_kv", ValueError, r"^d_kv = 10{30} and d_model = 8: too large",
         lambda: init_params(8, 2, rng, d_kv=10**30)),
        ("sinusoidal_positions", ValueError, r"^T = 10{30} and d = 4: too large",
         lambda: sinusoidal_positions(10**30, 4)),
        ("induction_model", ValueError, r"^vocab_size = 4 and d_model = 10{30}: too large",
         lambda: induction_model(4, 10**30, 8)),
        ("chunked_attention scale", ValueError, r"the scaled queries Q · scale overflow float64: Q .*, scale",
         lambda: chunked_attention(2 * Q, K, V, 2, scale=1e308)),
        ("attention -inf key", ValueError, r"^K contains -inf",
         lambda: scaled_dot_product_attention(key, minus_inf_key, V)),
        ("topk -inf key", ValueError, r"^K contains -inf", lambda: topk_attention(key, minus_inf_key, V, 2)),
        ("chunked -inf key", ValueError, r"^K contains -inf", lambda: chunked_attention(key, minus_inf_key, V, 2)),
        # issue 34: an int beyond float64 is a temperature too large, not Python's OverflowError
        ("softmax temperature 10**400", ValueError, r"^temperature must be a finite number, got 1000",
         lambda: softmax([1.0], temperature=10**400)),
    ]
    return cases


@pytest.mark.parametrize(("label", "error", "message", "call"), _issue_18_cases(),
                         ids=[case[0] for case in _issue_18_cases()])
def test_the_holes_found_by_hand_are_closed(label, error, message, call):
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # no warning before the error (an overflow, say)
        with pytest.raises(error, match=message):
            call()


# --- The last unclear and silent ones (issue 44), each named ---------------------------

def _issue_44_cases():
    from sitekit.widgets import data_attribute
    from snippets.induction import induction_model, induction_predict
    from snippets.kv_cache import grouped_query_attention
    from snippets.paged_cache import PagedKVCache, paged_attention
    from snippets.sparse_gated import gated_output
    from snippets.training import train
    from snippets.transformer import init_gpt

    rng = np.random.default_rng(0)
    Q, K, V = np.ones((4, 3, 8)), np.ones((2, 5, 8)), np.ones((2, 5, 6))
    cache = PagedKVCache(n_pages=4, page_size=2, d_k=2, d_v=1)
    seq = cache.new_sequence()
    cache.append(seq, np.ones((3, 2)), np.ones((3, 1)))
    wide = {**induction_model(4, 20, 8), "W_Q1": np.zeros((20, 9))}
    gpt = init_gpt(5, 8, 8, 1, 2, 16, rng)
    return [
        ("grouped_query_attention ragged mask", ValueError, r"^mask must be a boolean array \(True = may attend\), "
         r"got list \[\[True, False\], \[True\]\]: .*inhomogeneous",
         lambda: grouped_query_attention(Q, K, V, mask=[[True, False], [True]])),
        ("paged_attention ragged mask", ValueError, r"^mask must be a boolean array \(True = may attend\), got list",
         lambda: paged_attention(np.ones((1, 2)), cache, seq, mask=[[True, False, True], [True]])),
        ("init_gpt d_model 10**9", ValueError, r"^(vocab_size = 11 and )?d_model = 1000000000(?! and d_ff).*: too large",
         lambda: init_gpt(11, 16, 10**9, 2, 2, 32, rng)),
        ("train lr 1e308", ValueError, r"^lr = 1e\+308 is too large: after 1 Adam steps .* expected a learning rate",
         lambda: list(train(gpt, np.arange(5).repeat(4), 2, 3, 2, 6, 1e308, np.random.default_rng(0)))),
        ("induction_predict wider W_Q1", ValueError,
         r"^params\['W_Q1'\]'s columns and params\['W_K1'\]'s columns must be as many .* \(20, 9\) and \(20, 8\)",
         lambda: induction_predict([1, 2, 3], wide)),
        ("data_attribute NaN", ValueError, r"^data must be JSON data \(.*\), got float nan: ",
         lambda: data_attribute("x", float("nan"))),
        ("data_attribute set", TypeError, r"^data must be JSON data \(.*\), got set \{1\}: ",
         lambda: data_attribute("x", {1})),
        ("gated_output leading shapes", ValueError, r"^heads and X must have the same leading shape \(\.\.\., T\), "
         r"one state per answer, got heads \(2, 3, 4\) and X \(1, 3, 5\)",
         lambda: gated_output(np.ones((2, 3, 4)), np.ones((1, 3, 5)), np.ones((5, 4)))),
    ]


@pytest.mark.parametrize(("label", "error", "message", "call"), _issue_44_cases(),
                         ids=[case[0] for case in _issue_44_cases()])
def test_the_last_unclear_errors_are_clear(label, error, message, call):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(error, match=message):
            call()


@pytest.mark.parametrize("label", ["init_gpt n_layers 10**9", "sinusoidal_positions d 10**9"])
def test_more_than_the_machines_memory_is_refused_before_any_allocation(label, monkeypatch):
    """Below NumPy's limit a huge array is refused too, named by its sizes: it would hang, swapping, or end the process.

    The machine's memory is set to 16 GB here, so that the test says the same on every machine.
    """
    from snippets import _checks
    from snippets.positions import sinusoidal_positions
    from snippets.transformer import init_gpt

    monkeypatch.setattr(_checks, "MEMORY_BYTES", 2**34)
    call, message = {
        "init_gpt n_layers 10**9": (lambda: init_gpt(11, 16, 8, 10**9, 2, 32, np.random.default_rng(0)),
                                    r"^n_layers = 1000000000 and d_model = 8 and d_ff = 32: too large, the blocks' "
                                    r"parameters .* more than this machine's memory \(1\.72e\+10 bytes\)"),
        "sinusoidal_positions d 10**9": (lambda: sinusoidal_positions(3, 10**9),
                                         r"^T = 3 and d = 1000000000: too large, the position vectors of shape "
                                         r"\(3, 1000000000\) would take 2 arrays of that size at once, 4\.8e\+10 bytes"),
    }[label]
    with pytest.raises(ValueError, match=message):
        call()
