def forward(self, src):
    padding_mask = attncomp_lower_ops_padding_mask(src, 0)
    embed = self.embed(src)
    mul = torch.mul(embed, 8.0);  embed = None
    size = src.size(1);  src = None
    getattr_1 = mul.device
    arange = torch.arange(0, size, device = getattr_1);  size = getattr_1 = None
    getattr_2 = mul.dtype
    sinusoidal = attncomp_lower_ops_sinusoidal(arange, 64, getattr_2);  arange = getattr_2 = None
    add = torch.add(mul, sinusoidal);  mul = sinusoidal = None
    fully_masked_rows = attncomp_lower_ops_fully_masked_rows(padding_mask)
    encoder_layers_0_self_attn_k_proj = getattr(self.encoder.layers, "0").self_attn.k_proj(add)
    unflatten = torch.unflatten(encoder_layers_0_self_attn_k_proj, -1, (4, 16));  encoder_layers_0_self_attn_k_proj = None
    transpose = torch.transpose(unflatten, 1, 2);  unflatten = None
    encoder_layers_0_self_attn_v_proj = getattr(self.encoder.layers, "0").self_attn.v_proj(add)
    unflatten_1 = torch.unflatten(encoder_layers_0_self_attn_v_proj, -1, (4, 16));  encoder_layers_0_self_attn_v_proj = None
    transpose_1 = torch.transpose(unflatten_1, 1, 2);  unflatten_1 = None
    encoder_layers_0_self_attn_q_proj = getattr(self.encoder.layers, "0").self_attn.q_proj(add)
    unflatten_2 = torch.unflatten(encoder_layers_0_self_attn_q_proj, -1, (4, 16));  encoder_layers_0_self_attn_q_proj = None
    transpose_2 = torch.transpose(unflatten_2, 1, 2);  unflatten_2 = None
    transpose_3 = torch.transpose(transpose, -2, -1);  transpose = None
    matmul = torch.matmul(transpose_2, transpose_3);  transpose_2 = transpose_3 = None
    mul_1 = torch.mul(matmul, 0.25);  matmul = None
    masked_fill = torch.masked_fill(mul_1, padding_mask, -inf);  mul_1 = None
    softmax = torch.softmax(masked_fill, -1);  masked_fill = None
    masked_fill_1 = torch.masked_fill(softmax, fully_masked_rows, 0.0);  softmax = None
    matmul_1 = torch.matmul(masked_fill_1, transpose_1);  masked_fill_1 = transpose_1 = None
    transpose_4 = torch.transpose(matmul_1, 1, 2);  matmul_1 = None
    flatten = torch.flatten(transpose_4, -2);  transpose_4 = None
    encoder_layers_0_self_attn_o_proj = getattr(self.encoder.layers, "0").self_attn.o_proj(flatten);  flatten = None
    add_1 = torch.add(add, encoder_layers_0_self_attn_o_proj);  add = encoder_layers_0_self_attn_o_proj = None
    encoder_layers_0_self_attn_norm = getattr(self.encoder.layers, "0").self_attn_norm(add_1);  add_1 = None
    encoder_layers_0_ffn_fc1 = getattr(self.encoder.layers, "0").ffn.fc1(encoder_layers_0_self_attn_norm)
    relu = torch.relu(encoder_layers_0_ffn_fc1);  encoder_layers_0_ffn_fc1 = None
    encoder_layers_0_ffn_fc2 = getattr(self.encoder.layers, "0").ffn.fc2(relu);  relu = None
    add_2 = torch.add(encoder_layers_0_self_attn_norm, encoder_layers_0_ffn_fc2);  encoder_layers_0_self_attn_norm = encoder_layers_0_ffn_fc2 = None
    encoder_layers_0_ffn_norm = getattr(self.encoder.layers, "0").ffn_norm(add_2);  add_2 = None
    encoder_layers_1_self_attn_k_proj = getattr(self.encoder.layers, "1").self_attn.k_proj(encoder_layers_0_ffn_norm)
    unflatten_3 = torch.unflatten(encoder_layers_1_self_attn_k_proj, -1, (4, 16));  encoder_layers_1_self_attn_k_proj = None
    transpose_5 = torch.transpose(unflatten_3, 1, 2);  unflatten_3 = None
    encoder_layers_1_self_attn_v_proj = getattr(self.encoder.layers, "1").self_attn.v_proj(encoder_layers_0_ffn_norm)
    unflatten_4 = torch.unflatten(encoder_layers_1_self_attn_v_proj, -1, (4, 16));  encoder_layers_1_self_attn_v_proj = None
    transpose_6 = torch.transpose(unflatten_4, 1, 2);  unflatten_4 = None
    encoder_layers_1_self_attn_q_proj = getattr(self.encoder.layers, "1").self_attn.q_proj(encoder_layers_0_ffn_norm)
    unflatten_5 = torch.unflatten(encoder_layers_1_self_attn_q_proj, -1, (4, 16));  encoder_layers_1_self_attn_q_proj = None
    transpose_7 = torch.transpose(unflatten_5, 1, 2);  unflatten_5 = None
    transpose_8 = torch.transpose(transpose_5, -2, -1);  transpose_5 = None
    matmul_2 = torch.matmul(transpose_7, transpose_8);  transpose_7 = transpose_8 = None
    mul_2 = torch.mul(matmul_2, 0.25);  matmul_2 = None
    masked_fill_2 = torch.masked_fill(mul_2, padding_mask, -inf);  mul_2 = padding_mask = None
    softmax_1 = torch.softmax(masked_fill_2, -1);  masked_fill_2 = None
    masked_fill_3 = torch.masked_fill(softmax_1, fully_masked_rows, 0.0);  softmax_1 = fully_masked_rows = None
    matmul_3 = torch.matmul(masked_fill_3, transpose_6);  masked_fill_3 = transpose_6 = None
    transpose_9 = torch.transpose(matmul_3, 1, 2);  matmul_3 = None
    flatten_1 = torch.flatten(transpose_9, -2);  transpose_9 = None
    encoder_layers_1_self_attn_o_proj = getattr(self.encoder.layers, "1").self_attn.o_proj(flatten_1);  flatten_1 = None
    add_3 = torch.add(encoder_layers_0_ffn_norm, encoder_layers_1_self_attn_o_proj);  encoder_layers_0_ffn_norm = encoder_layers_1_self_attn_o_proj = None
    encoder_layers_1_self_attn_norm = getattr(self.encoder.layers, "1").self_attn_norm(add_3);  add_3 = None
    encoder_layers_1_ffn_fc1 = getattr(self.encoder.layers, "1").ffn.fc1(encoder_layers_1_self_attn_norm)
    relu_1 = torch.relu(encoder_layers_1_ffn_fc1);  encoder_layers_1_ffn_fc1 = None
    encoder_layers_1_ffn_fc2 = getattr(self.encoder.layers, "1").ffn.fc2(relu_1);  relu_1 = None
    add_4 = torch.add(encoder_layers_1_self_attn_norm, encoder_layers_1_ffn_fc2);  encoder_layers_1_self_attn_norm = encoder_layers_1_ffn_fc2 = None
    encoder_layers_1_ffn_norm = getattr(self.encoder.layers, "1").ffn_norm(add_4);  add_4 = None
    return encoder_layers_1_ffn_norm
    