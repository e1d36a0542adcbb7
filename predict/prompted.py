"""The kinds of model that read a prompt and reply in words: what they share (`PromptedPredictor`), and causal LMs.

- `causal` (`AutoModelForCausalLM`): a prompt template (`{masked_caption}`, --prompt), through the
  chat template when the tokenizer has one; it replies in words.

Their replies (one per beam) are read by the answer reader (`fiberbench.predict.replies.read_answers`,
through `fiberbench.predict.answers.Answerer`). Video-language models are prompted too: `video`.
"""

from fiberbench.predict.predictors import Predictor


class PromptedPredictor(Predictor):
    """Models that read a prompt and reply in words (causal and video-language): their shared prompt and replies.

    The exact text of every caption is rendered once, up front (`render_texts`): a chat template
    from the model's folder is its author's code, run bounded in a child process (`chat_templates`).
    """

    prompted = True
    chat_template: str | None
    # (masked caption, image parts) -> the exact text the model reads, from `render_texts`
    texts: dict[tuple[str, int | None], str]

    def _pad_on_the_left(self, tokenizer) -> None:
        # Every prompt of a batch then ends where generation starts.
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.tokenizer = tokenizer

    def text(self, masked_caption: str, image_parts: int | None = None) -> str:
        """The exact text the model reads for a caption (with `image_parts` image placeholders where the kind puts a
        clip's frames in as images), rendered here: see `render_texts`."""
        raise NotImplementedError

    def image_parts(self, num_frames: int | None) -> int | None:
        """How many image placeholders the text of a clip of `num_frames` frames holds (None: the text does not
        depend on the clip)."""
        return None

    def prepare_clips(self, split, keys):
        self.render_texts(list(split["masked_caption"]))

    def render_texts(self, masked_captions: list[str], frame_counts: list[int | None] | None = None) -> None:
        """Render the text of every caption of the run (each clip's, given its frame count), a chat template in a
        bounded child process (a `DataError` names what went wrong), and keep them for `rendered`.

        The first caption is also rendered as `prompt` describes it in the predictions' metadata.
        """
        from fiberbench.predict.chat_templates import render_bounded

        counts = frame_counts or [None] * len(masked_captions)
        prompts = [(masked_captions[0], self.image_parts(None))] if masked_captions else []
        prompts = list(dict.fromkeys([*prompts, *((c, self.image_parts(n)) for c, n in zip(masked_captions, counts))]))
        if self.chat_template is None:  # the --prompt template alone, which check_template checked
            self.texts = {arguments: self.text(*arguments) for arguments in prompts}
        else:
            self.texts = render_bounded(self.text, prompts, self.settings.model_name_or_path)

    def rendered(self, masked_caption: str, num_frames: int | None = None) -> str:
        """The text of a caption (of a clip of `num_frames` frames), as `render_texts` rendered it."""
        return self.texts[masked_caption, self.image_parts(num_frames)]

    def prompt(self, masked_caption: str) -> dict:
        return {
            "template": self.settings.prompt,
            "chat_template": self.chat_template,
            "example": self.rendered(masked_caption),
        }

    def replies(self, inputs) -> list[list[str]]:
        """Each row's replies as generated, one per beam, best first, from the batch's `inputs`."""
        raise NotImplementedError

    def _generate(self, inputs, decoder) -> list[list[str]]:
        """Generate from a batch of `inputs` on the model's device: each clip's replies (one per beam, best first),
        decoded by `decoder`."""
        import torch

        with torch.inference_mode():
            sequences = self.model.generate(
                **inputs,
                num_return_sequences=self.num_beams,
                pad_token_id=self.tokenizer.pad_token_id,
                **self.decoding(),
            )
        replies = decoder.batch_decode(sequences[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
        return [replies[start : start + self.num_beams] for start in range(0, len(replies), self.num_beams)]


class CausalPredictor(PromptedPredictor):
    """Causal LMs: the prompt template, through the tokenizer's chat template when it has one."""

    def __init__(self, kind, settings, loading: dict, config):
        super().__init__(kind, settings, loading, config)
        from transformers import AutoTokenizer

        self._pad_on_the_left(AutoTokenizer.from_pretrained(settings.model_name_or_path, **loading))
        self.chat_template = self.tokenizer.chat_template

    def text(self, masked_caption, image_parts=None):
        prompt = self.settings.prompt.format(masked_caption=masked_caption)
        if self.chat_template is None:
            return prompt
        return self.tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
        )

    def inputs(self, rows):
        # A chat template writes its own special tokens (BOS); a plain prompt gets the tokenizer's.
        return self.tokenizer(
            [self.rendered(row["masked_caption"]) for row in rows],
            padding=True,
            add_special_tokens=self.chat_template is None,
            return_tensors="pt",
        )

    def replies(self, inputs):
        # non_blocking: from a loader's pinned batch the copy to a GPU does not hold up this process.
        return self._generate(inputs.to(self.model.device, non_blocking=True), self.tokenizer)
