"""`fiberbench evaluate` (`command`): predictions files read and joined to a split (`predictions`), scored through the
metric (`results`), shown as results.md and by_category.png (`report`), and a model card's `model_index`."""
