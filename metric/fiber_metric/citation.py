"""The FIBER paper's BibTeX entry: the one copy, cited by the metric, its card, the dataset builder, the model card and
the README (`fiberbench.CITATION` is this), kept in the metric's folder because the folder ships alone."""

CITATION = """\
@inproceedings{castro-etal-2022-fiber,
    title = "{FIB}er: Fill-in-the-Blanks as a Challenging Video Understanding Evaluation Framework",
    author = "Castro, Santiago and Wang, Ruoyao and Huang, Pingxuan and Stewart, Ian and Ignat, Oana and
      Liu, Nan and Stroud, Jonathan C. and Mihalcea, Rada",
    booktitle = "Proceedings of the 60th Annual Meeting of the Association for Computational Linguistics
      (Volume 1: Long Papers)",
    year = "2022",
    publisher = "Association for Computational Linguistics",
}
"""
