"""fiberbench.hub's probe before loading a Hub model or dataset: what cannot be loaded is named in seconds."""

import pytest

from fiberbench.errors import DataError
from fiberbench.hub import hub_problem, push_folder
from fiberbench.models import model_loading_options


@pytest.fixture
def pushed_model(hub_server, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    push_folder(folder, "fiber-org/model", repo_type="model", commit_message="Add a model")
    return "fiber-org/model"


def test_a_model_the_hub_has_needs_no_options(pushed_model):
    assert hub_problem(pushed_model) is None
    assert model_loading_options(pushed_model, flag="--model_name_or_path") == {}


@pytest.mark.parametrize(
    "repo_id, repo_type, revision, problem",
    [
        ("fiber-org/model", "model", "v9", "has no revision 'v9' of model 'fiber-org/model'"),
        ("fiber-org/other", "model", None, "has no model 'fiber-org/other' (or it is private"),
        ("fiber-org/fiber", "dataset", None, "has no dataset 'fiber-org/fiber' (or it is private"),
    ],
)
def test_what_the_hub_lacks_is_named(pushed_model, repo_id, repo_type, revision, problem):
    assert problem in hub_problem(repo_id, repo_type=repo_type, revision=revision)


def test_a_model_that_cannot_be_loaded_is_a_data_error_naming_the_flag(pushed_model):
    with pytest.raises(DataError, match=r"--model_name_or_path fiber-org/model: not a local folder, .* no revision"):
        model_loading_options(pushed_model, flag="--model_name_or_path", revision="v9")
