"""The presentation layer both front ends share: how a number reads (`numbers`), the table model
(`grid`), the one renderer that fits a table to a width without cutting a number (`render`), and the
domain's tables built from read-layer results (`tables`). The CLI prints what it renders; the console
shows the same renderables in its views. Nothing here reads the store or computes a statistic."""
