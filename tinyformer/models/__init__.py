"""Models, each in one readable file: config dataclass, blocks, model."""

from tinyformer.models.bahdanau import BahdanauConfig, RNNSearch
from tinyformer.models.bert import (
    BERT_CONFIGS,
    Bert,
    BertConfig,
    BertForMaskedLM,
    BertForPreTraining,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from tinyformer.models.cnn import CNN, CNNConfig
from tinyformer.models.gpt import CONFIGS as GPT_CONFIGS
from tinyformer.models.gpt import GPT, GPTConfig
from tinyformer.models.mae import MAE, MAEConfig
from tinyformer.models.rlhf import HeadConfig, PolicyWithValue, RewardModel
from tinyformer.models.segmentation import FCN, SegConfig, SegNet, UNet
from tinyformer.models.seq2seq import Seq2SeqConfig, Transformer
from tinyformer.models.siren import FourierFeatureMLP, ReLUMLP, Siren, SirenConfig
from tinyformer.models.swin import SWIN_CONFIGS, SwinConfig, SwinTransformer
from tinyformer.models.vilbert import (
    ViLBERT,
    ViLBERTConfig,
    ViLBERTForPreTraining,
    ViLBERTForQuestionAnswering,
)
from tinyformer.models.vit import VIT_CONFIGS, ViT, ViTConfig, attention_rollout
from tinyformer.models.xlm import XLM, XLMConfig, XLMForMaskedLM, XLMForSequenceClassification

__all__ = [
    "BERT_CONFIGS", "BahdanauConfig", "Bert", "BertConfig", "BertForMaskedLM",
    "BertForPreTraining", "BertForSequenceClassification", "BertForTokenClassification", "CNN",
    "CNNConfig", "FCN", "FourierFeatureMLP", "GPT", "GPTConfig", "GPT_CONFIGS", "HeadConfig",
    "MAE", "MAEConfig", "PolicyWithValue", "RNNSearch", "ReLUMLP", "RewardModel", "SWIN_CONFIGS",
    "SegConfig", "SegNet", "Seq2SeqConfig", "Siren", "SirenConfig", "SwinConfig",
    "SwinTransformer", "Transformer", "UNet", "VIT_CONFIGS", "ViLBERT", "ViLBERTConfig",
    "ViLBERTForPreTraining", "ViLBERTForQuestionAnswering", "ViT", "ViTConfig", "XLM", "XLMConfig",
    "XLMForMaskedLM", "XLMForSequenceClassification", "attention_rollout",
]  # fmt: skip
