"""train.py's arguments: the paper's recipe as defaults, the main job's settings, Table 3's configs, precedence."""

import pytest

from fiberbench.training.arguments import CONFIGS_DIR, parse_args

TABLE_3 = ["t5_zero_shot", "t5_fine_tuned", "t5_i3d", "t5_1f_i3d", "late_fusion_t5_i3d", "late_fusion_t5_1f_i3d",
           "most_frequent_answer"]


def test_the_defaults_are_the_papers_recipe():
    model, data, args = parse_args(["--model_name_or_path", "t5-base", "--output_dir", "x"])
    assert (args.per_device_train_batch_size, args.learning_rate, args.num_train_epochs) == (64, 1e-4, 10)
    assert (args.weight_decay, args.max_grad_norm, args.lr_scheduler_type.value) == (0, 0, "linear")
    assert args.warmup_steps == 0  # train.py makes it one epoch
    assert (args.eval_strategy.value, args.load_best_model_at_end, args.metric_for_best_model) == ("epoch", True, "f1")
    assert args.do_train and args.do_eval and args.do_predict and model.only_noun_phrases and not args.remove_unused_columns
    assert data.dataset_name is None and model.fusion is None


def test_the_main_job_layers_the_sample_demo_under_a_config_and_flags(tmp_path):
    args = parse_args([])[2]
    assert (args.output_dir, args.learning_rate, args.optim.value) == ("outputs/sample_demo", 0.003, "adamw_torch")
    config = tmp_path / "mine.yaml"
    config.write_text("learning_rate: 0.01\nnum_train_epochs: 3\n")
    model, _, args = parse_args(["--config", config, "--num_train_epochs", 5])
    assert (args.learning_rate, args.num_train_epochs, model.config_overrides is not None) == (0.01, 5, True)


def test_table_3_has_a_config_for_every_row_and_each_parses():
    assert sorted(path.stem for path in CONFIGS_DIR.glob("*.yaml")) == sorted([*TABLE_3, "sample_demo"])
    for name in TABLE_3:
        model, data, args = parse_args(["--config", name])
        assert data.dataset_name == "fiber" and args.output_dir == f"outputs/{name}", name
    assert parse_args(["--config", "t5_zero_shot"])[2].do_train is False
    assert parse_args(["--config", "late_fusion_t5_1f_i3d"])[0].single_feature is True


@pytest.mark.parametrize("flag", ["--do_eval false", "--no_do_eval"])
def test_without_validation_the_last_model_is_the_runs(flag):
    args = parse_args(flag.split())[2]
    assert args.eval_strategy.value == "no" and not args.load_best_model_at_end
