# -*- coding:utf-8 -*-
"""
@file name  : lesson-03-Linear-Regression.py
@brief      : 一元线性回归模型
"""
import torch
torch.manual_seed(10)

lr = 0.01  # 学习率
best_loss = float("inf")

# 创建训练数据
x = torch.rand(200, 1) * 10  # x data (tensor), shape=(20, 1)
y = 3*x + (5 + torch.randn(200, 1))  # y data (tensor), shape=(20, 1)

# 构建线性回归参数
w = torch.randn((1), requires_grad=True)
b = torch.zeros((1), requires_grad=True)

for iteration in range(1000):

    # 前向传播
    wx = torch.mul(w, x)
    y_pred = torch.add(wx, b)

    # 计算 MSE loss
    loss = (0.5 * (y - y_pred) ** 2).mean()

    # 反向传播
    loss.backward()

    current_loss = loss.item()
    if current_loss < best_loss:
        best_loss = current_loss
        best_w = w
        best_b = b

    # 绘图
    if iteration % 100 == 0:
        print("Iteration: {} Loss={:.4f} w: {:.4f} b: {:.4f}".format(iteration, current_loss, w.item(), b.item()))
        if loss.data.numpy() < 0.55:
            break

    # 更新参数
    w.data.sub_(lr * w.grad)
    b.data.sub_(lr * b.grad)

    # 梯度清零
    w.grad.zero_()
    b.grad.zero_()

print("best_loss {:.4f}".format(best_loss))
