"""Video-language models (`AutoModelForImageTextToText` + `AutoProcessor`): frames of each clip's video, then the prompt.

Frames are sampled from the clip's video in --video_dir (`fiberbench.videos`, by the one rule of
`choose_sampling`: --num_frames, --fps, else the video processor's own sampling), then put to the
model with the prompt; it replies in words. The frames go in as a video when the processor has a
video processor (`videos=`, the chat template's video part, the frames' times as video metadata),
else as images through its image processor (`--video_input`). Every clip's video is found and
checked to give those frames before any generation (`find_videos`, as `prepare_clips`).
"""

from typing import TYPE_CHECKING

from fiberbench.videos import (
    Clip,
    ClipFrames,
    FrameSampling,
    check_clip_videos,
    choose_sampling,
    find_clip_video,
    sample_frames,
)

from fiberbench.predict.prompted import PromptedPredictor

if TYPE_CHECKING:
    from pathlib import Path

    from transformers import BatchFeature

    from fiberbench.records import ClipKey
    from fiberbench.videos import ClipVideo

    from fiberbench.predict.settings import PredictSettings

# Frames per clip when neither the flags nor the video processor choose them.
DEFAULT_NUM_FRAMES = 8
# Where a video processor keeps its own frame sampling (`BaseVideoProcessor` and its subclasses).
SAMPLING_DEFAULTS = ("do_sample_frames", "fps", "num_frames", "min_frames", "max_frames")


def sampling_defaults(video_processor) -> dict:
    """The frame-sampling settings a video processor has, by name (none for a processor without one)."""
    values = {name: getattr(video_processor, name, None) for name in SAMPLING_DEFAULTS}
    return {name: value for name, value in values.items() if value is not None}


def frame_sampling(settings: "PredictSettings", video_processor) -> tuple[FrameSampling, str]:
    """The frames each clip gives, by the one rule (`fiberbench.videos.choose_sampling`), and what chose them:
    --num_frames, else --fps (up to --max_frames), else the video processor's own default rate or number of frames,
    else `DEFAULT_NUM_FRAMES`."""
    defaults = sampling_defaults(video_processor)
    default_by = f"the defaults of {type(video_processor).__name__}"
    if "fps" in defaults:
        default = FrameSampling(fps=defaults["fps"], max_frames=defaults.get("max_frames", defaults.get("num_frames")))
    elif "num_frames" in defaults:
        default = FrameSampling(num_frames=defaults["num_frames"])
    else:
        default, default_by = (
            FrameSampling(num_frames=DEFAULT_NUM_FRAMES),
            f"fiberbench's default ({DEFAULT_NUM_FRAMES} frames)",
        )
    sampling = choose_sampling(settings.num_frames, settings.fps, settings.max_frames, default)
    flag = next((f"--{name}" for name in ("num_frames", "fps") if getattr(settings, name) is not None), None)
    return sampling, flag or default_by


def find_videos(
    video_dir: "Path", keys: "list[ClipKey]", sampling: "FrameSampling", skip_missing: bool
) -> "tuple[list[ClipVideo | None], list[int | None]]":
    """Each clip's video, checked to give the frames of `sampling` (`check_clip_videos`), and how many frames it
    gives; None for a missing one with `skip_missing` (--skip_missing_videos)."""
    clips = [
        Clip(f"{video_id}, {start}-{end} s", find_clip_video(video_dir, video_id, start, end), (video_id, start, end))
        for video_id, start, end in keys
    ]
    spans = check_clip_videos(
        clips,
        sampling,
        video_dir,
        skip_missing,
        skipping="predict the others (the skipped clips get an empty answer)",
        skipped="skipped, with an empty answer",
    )
    return [clip.video for clip in clips], [None if span is None else sampling.count(span) for span in spans]


class VideoPredictor(PromptedPredictor):
    """Video-language models: frames of the clip's video, as a video or as images (`--video_input`), then the prompt.

    As a video, the frames go through the processor's video processor (`videos=`) with the clip's
    `video_metadata` and the chat template's `{"type": "video"}` part, so the family's own video
    placeholders (with the frames' times, for the families that write them) reach the model; the
    processor does not sample again (`do_sample_frames=False`). As images, each frame is one
    `{"type": "image"}` part through the image processor, as multi-image models read pictures.
    """

    reads_video = True

    def __init__(self, kind, settings, loading: dict, config):
        super().__init__(kind, settings, loading, config)
        from transformers import AutoProcessor

        from fiberbench.errors import UsageError

        name = settings.model_name_or_path
        try:
            self.processor = AutoProcessor.from_pretrained(name, **loading)
        except ImportError as error:  # transformers' video processors need torchvision
            needs = " ".join(str(error).split()).split(". ")[0]  # its first sentence
            raise UsageError(
                f"--model_name_or_path {name}: its processor cannot be built here ({needs}); install torch and "
                'torchvision as a matching pair, then pip install -e ".[video]" (README: "Evaluate a video LLM")'
            ) from error
        self.chat_template = self.processor.chat_template
        video_processor = getattr(self.processor, "video_processor", None)
        described = f"--model_name_or_path {name}: its processor ({type(self.processor).__name__})"
        if settings.video_input == "video" and video_processor is None:
            raise UsageError(f"--video_input video: {described} has no video processor; use --video_input images")
        self.video_input = settings.video_input or "auto"
        if self.video_input == "auto":
            self.video_input = "images" if video_processor is None else "video"
        if self.video_input == "images" and getattr(self.processor, "image_processor", None) is None:
            raise UsageError(f"{described} has no image processor to read the clip's frames as images")
        placeholder = {"video": "video_token", "images": "image_token"}[self.video_input]
        if self.chat_template is None and getattr(self.processor, placeholder, None) is None:
            raise UsageError(
                f"{described} has neither a chat template nor a {placeholder.replace('_', ' ')}, so there is no "
                "known way to place the clip in the prompt"
            )
        self.processor_defaults = sampling_defaults(video_processor) if video_processor is not None else {}
        self.sampling, self.sampling_chosen_by = frame_sampling(settings, video_processor)
        self._pad_on_the_left(self.processor.tokenizer)

    def prepare_clips(self, split, keys):
        """Each clip's video in --video_dir, checked to give the frames of the sampling (`find_videos`), then every
        prompt rendered for its clip's frames (`render_texts`)."""
        videos, frame_counts = find_videos(
            self.settings.video_dir, keys, self.sampling, self.settings.skip_missing_videos
        )
        self.render_texts(list(split["masked_caption"]), frame_counts)
        return videos

    def render_texts(self, masked_captions, frame_counts=None):
        """As every prompted kind renders its texts; then a chat template that writes no placeholder for the clip's
        part is refused (the clip would not reach the model), naming the other --video_input."""
        from fiberbench.errors import UsageError

        self._check_fewest_frames(frame_counts)
        super().render_texts(masked_captions, frame_counts)
        placeholder = {"video": "video_token", "images": "image_token"}[self.video_input]
        token = getattr(self.processor, placeholder, None)
        if masked_captions and self.chat_template is not None and token is not None:
            if token not in self.rendered(masked_captions[0]):
                part, other = ("a video part", "images") if self.video_input == "video" else ("an image part", "video")
                raise UsageError(
                    f"--model_name_or_path {self.settings.model_name_or_path}: its processor "
                    f"({type(self.processor).__name__}): its chat template writes no {token} for {part}, so the clip "
                    f"cannot be put in the prompt that way; try --video_input {other}"
                )

    def _check_fewest_frames(self, frame_counts: list[int | None] | None) -> None:
        """Put a blank clip of the fewest frames any clip gives through the video processor, before any work: a
        family that needs more (Qwen3-VL: its temporal patch, 2 frames) is refused here, not in the middle of the run.
        """
        from fiberbench.errors import UsageError

        counts = [count for count in frame_counts or [] if count is not None]
        if self.video_input != "video" or not counts:
            return
        fewest = min(counts)
        import numpy as np

        # 224 pixels a side: larger than every family's patch grid, so only the number of frames can be refused.
        blank = [np.zeros((224, 224, 3), dtype=np.uint8)] * fewest
        metadata = {"total_num_frames": fewest, "fps": 1.0, "duration": float(fewest), "width": 224, "height": 224}
        try:
            self.processor.video_processor(
                videos=[blank],
                video_metadata=[{**metadata, "frames_indices": list(range(fewest))}],
                do_sample_frames=False,
                return_tensors="pt",
            )
        except ValueError as error:
            processor = type(self.processor.video_processor).__name__
            raise UsageError(
                f"--model_name_or_path {self.settings.model_name_or_path}: its video processor ({processor}) cannot read a "
                f"clip of {fewest} frame{'s' * (fewest != 1)} ({' '.join(str(error).split())}), and the frames chosen "
                f"by {self.sampling_chosen_by} give some clips that few: ask for more frames (--num_frames)"
            ) from error

    def video_settings(self) -> dict:
        """How the clips reach the model, as the predictions' metadata records it."""
        return {
            "input": self.video_input,
            "num_frames": self.sampling.num_frames,
            "fps": self.sampling.fps,
            "max_frames": self.sampling.max_frames,
            "frames": self.sampling.rule(),
            "chosen_by": self.sampling_chosen_by,
            "processor_defaults": self.processor_defaults,
            "video_metadata": (
                "fps, duration, total_num_frames and frames_indices of each clip, counted from its start"
                if self.video_input == "video"
                else None
            ),
        }

    def image_parts(self, num_frames):
        """One image part per frame on the images path (the sampling's number when the clip's is not known); the video
        path's text has one video part, whatever the frames."""
        if self.video_input == "video":
            return None
        return num_frames or self.sampling.num_frames or 1

    def text(self, masked_caption, image_parts=None):
        """The prompt with the clip's placeholder: one video part, or `image_parts` image parts (one per frame)."""
        prompt = self.settings.prompt.format(masked_caption=masked_caption)
        if self.chat_template is None:
            if self.video_input == "video":
                return self.processor.video_token + prompt
            return self.processor.image_token * image_parts + prompt
        parts = [{"type": "video"}] if self.video_input == "video" else [{"type": "image"}] * image_parts
        return self.processor.apply_chat_template(
            [{"role": "user", "content": [*parts, {"type": "text", "text": prompt}]}],
            add_generation_prompt=True,
            tokenize=False,
        )

    def prompt(self, masked_caption):
        described = super().prompt(masked_caption)
        if self.video_input == "images" and self.sampling.num_frames is None:
            described["example_num_frames"] = 1  # with --fps each clip has its own number of image parts
        return described

    def _processed(self, rows: list[dict], clips: "list[ClipFrames]"):
        """The processor's output for rows (each with its `masked_caption`) and their clips' frames."""
        texts = [self.rendered(row["masked_caption"], len(clip.frames)) for row, clip in zip(rows, clips)]
        if self.video_input == "video":
            media = {
                "videos": [clip.frames for clip in clips],
                "video_metadata": [clip.video_metadata() for clip in clips],
                "do_sample_frames": False,
            }
        else:
            media = {"images": [clip.frames for clip in clips]}
        # A chat template writes its own special tokens; a plain prompt gets the tokenizer's.
        return self.processor(
            text=texts, padding=True, return_tensors="pt", add_special_tokens=self.chat_template is None, **media
        )

    def num_visual_tokens(self, inputs) -> int:
        """The image and video placeholder tokens in a batch's `input_ids` (the frames' cost in the context)."""
        ids = {getattr(self.processor, name, None) for name in ("image_token_id", "video_token_id")} - {None}
        return int(sum((inputs["input_ids"] == token_id).sum() for token_id in ids))

    def inputs(self, rows) -> "list[tuple[list[int], BatchFeature]]":
        """The batch as groups of rows, each its rows' positions in the batch and the processor's output for them.

        Each clip is decoded once. With --fps clips may give different numbers of frames, and the
        processors that stack a batch's videos (LLaVA-OneVision, InternVL, ...) need them equal:
        clips are put to the model in groups of equal frame counts.
        """
        clips = [sample_frames(row["video"], self.sampling) for row in rows]
        groups: dict[int, list[int]] = {}
        for index, clip in enumerate(clips):
            groups.setdefault(len(clip.frames), []).append(index)
        return [
            (indices, self._processed([rows[i] for i in indices], [clips[i] for i in indices]))
            for indices in groups.values()
        ]

    def replies(self, inputs):
        replies = [None] * sum(len(indices) for indices, _ in inputs)
        for indices, processed in inputs:
            # Pixel values in the model's dtype (bf16 on GPUs that support it): the processor makes float32.
            processed = processed.to(self.model.device, dtype=self.model.dtype, non_blocking=True)
            for index, generated in zip(indices, self._generate(processed, self.processor)):
                replies[index] = generated
        return replies
