"""A model folder's chat template is its author's code: `fiberbench predict` renders it bounded, and its failures are one line.

transformers renders chat templates in jinja2's sandbox, which keeps them from Python's internals
but not from failing in a dozen ways, looping for hours or growing without end. Each case here is
a real model folder (the tiny causal LM or the tiny LLaVA) whose template does one such thing.
"""

import re
import shutil
import time

import pytest

from fiberbench.predict.chat_templates import SECONDS_TO_START

DATA = 1
# Template -> the pattern of what the one line says about it.
TEMPLATES = {
    "an include of a file": (
        "{% include '/etc/passwd' %}",
        r"cannot be rendered \(TypeError: no loader for this environment specified\)",
    ),
    "a syntax error": ("{% for message in messages %}{{ message['content'] }}", r"cannot be rendered \(TemplateSyntaxError: "),
    "a message that is not there": ("{{ messages[5]['content'] }}", r"cannot be rendered \(UndefinedError: "),
    "raise_exception": (
        "{{ raise_exception('This model only chats in French') }}",
        r"cannot be rendered \(TemplateError: This model only chats in French\)",
    ),
    "a reach for Python's internals": (
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        r"cannot be rendered \((SecurityError|UndefinedError): ",
    ),
    "a loop that does not end": (
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        r"took more than 2 s to render one prompt",
    ),
    # Without a bound this asks for 21 GB at once (300 MB first). The string is made at render time: jinja folds
    # constants when it compiles a template, which a time bound stops first.
    "a string of 21 GB": (
        "{% set y = messages[0]['content'][:1] * 300000000 %}{{ y * 70 }}",
        r"needed more than 1 GiB of memory to render one prompt",
    ),
    "a constant of 21 GB": ("{{ 'y' * 300000000 * 70 }}", r"(took more than 2 s|needed more than 1 GiB of memory)"),
    "a prompt of 2 MB": (
        "{{ 'y' * 2000000 }}",
        r"rendered a prompt of 2,000,000 characters, more than the 100,000 a prompt may have",
    ),
}


def with_template(tiny_models, tmp_path, kind: str, template: str):
    folder = tmp_path / f"{kind}_model"
    shutil.copytree(tiny_models[kind], folder)
    (folder / "chat_template.jinja").write_text(template, encoding="utf-8")
    return folder


@pytest.mark.parametrize("case", TEMPLATES)
def test_a_bad_chat_template_is_one_line_and_bounded(case, tiny_models, tmp_path, cli_error):
    template, pattern = TEMPLATES[case]
    folder = with_template(tiny_models, tmp_path, "causal", template)
    output = tmp_path / "predictions.jsonl"
    started = time.monotonic()
    status, line = cli_error(
        "predict", "--model_name_or_path", folder, "--max_predict_samples", "2", "--output_file", output
    )
    assert status == DATA and re.search(
        rf"^fiberbench predict: error: --model_name_or_path {re.escape(str(folder))}: its chat template {pattern}", line
    ), line
    # Bounded: the render's own deadline (starting the child, then 2 s a prompt) is minutes, a loop's would be hours.
    assert time.monotonic() - started < SECONDS_TO_START + 60
    assert not output.exists()


@pytest.mark.parametrize("case", ["a syntax error", "a loop that does not end"])
def test_a_video_language_models_chat_template_is_bounded_too(case, tiny_models, tmp_path, video_dir, cli_error):
    template, pattern = TEMPLATES[case]
    folder = with_template(tiny_models, tmp_path, "video", template)
    status, line = cli_error(
        "predict", "--model_name_or_path", folder, "--video_dir", video_dir, "--max_predict_samples", "2",
        "--num_frames", "2", "--output_file", tmp_path / "predictions.jsonl",
    )
    assert status == DATA and re.search(f"its chat template {pattern}", line), line


def test_a_template_that_depends_on_the_caption_is_bounded_on_every_prompt(tiny_models, tmp_path, cli_error):
    """Every prompt is rendered bounded, not only a first one: this template hangs on the sample's second caption."""
    from fiberbench.data import load_sample

    second = load_sample("text")["test"][1]["masked_caption"]
    template = (
        "{% for message in messages %}{% if " + repr(second) + " in message['content'] %}"
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
        "{% endif %}{{ message['content'] }}{% endfor %}"
    )
    folder = with_template(tiny_models, tmp_path, "causal", template)
    status, line = cli_error(
        "predict", "--model_name_or_path", folder, "--max_predict_samples", "2", "--output_file",
        tmp_path / "predictions.jsonl",
    )
    assert status == DATA and "its chat template took more than 2 s to render one prompt" in line, line


def test_the_renderer_needs_nothing_of_the_callers_main(run_unguarded_script, tiny_models, tmp_path):
    """The renderer used to be a spawned process, which runs the caller's script again (or looks for `<stdin>`)."""
    output = tmp_path / "predictions.jsonl"
    script = (
        "import sys\n"
        "from fiberbench.cli import main\n"
        f"sys.exit(main(['predict', '--model_name_or_path', {str(tiny_models['causal'])!r}, '--max_predict_samples', "
        f"'2', '--output_file', {str(output)!r}]))\n"
    )
    finished = run_unguarded_script(script)
    assert finished.returncode == 0, finished.stderr
    assert len(output.read_text().splitlines()) == 2


def test_a_renderer_that_fails_to_start_says_what_failed(tiny_models, tmp_path, cli_error, monkeypatch):
    """A child that ends before it answers is named with how it ended and its last words, not blamed on the template:
    here `sys.executable` is the Python this environment was made from, which has no fiberbench (as where an
    application embeds Python)."""
    import sys
    from pathlib import Path

    base_python = Path(sys.base_prefix) / "bin" / "python3"
    if sys.prefix == sys.base_prefix or not base_python.is_file():
        pytest.skip("not in a virtual environment: no Python without fiberbench at hand")
    monkeypatch.setattr(sys, "executable", str(base_python))
    monkeypatch.chdir(tmp_path)  # not the source tree, where `python -m` would find the package's folder
    status, line = cli_error(
        "predict", "--model_name_or_path", tiny_models["causal"], "--max_predict_samples", "2", "--output_file",
        tmp_path / "predictions.jsonl",
    )
    assert re.search(
        r"error: the process rendering the chat template \(python -m fiberbench.helper_processes, PID \d+\) ended with "
        r"exit status 1 before it answered; its last line: .*No module named 'fiberbench'",
        line,
    ), line
