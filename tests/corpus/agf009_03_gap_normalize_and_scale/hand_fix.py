import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

mean_arr = [0.485, 0.456, 0.406]
stddev_arr = [0.229, 0.224, 0.225]
mag_in = 10.0
foolmodel = 'vgg16'
device = torch.device('cpu')


class ResnetGenerator(nn.Module):
    def __init__(self, ngf=8):
        super(ResnetGenerator, self).__init__()
        self.model = nn.Sequential(nn.Conv2d(3, ngf, 3, padding=1), nn.ReLU(True), nn.Conv2d(ngf, 3, 3, padding=1), nn.Tanh())

    def forward(self, input):
        return self.model(input)


def normalize_and_scale(delta_im, mode='train'):
    if foolmodel == 'incv3':
        delta_im = nn.ConstantPad2d((0,-1,-1,0),0)(delta_im) # crop slightly to match inception

    delta_im = delta_im + 1 # now 0..2
    delta_im = delta_im * 0.5 # now 0..1

    # normalize image color channels
    for c in range(3):
        delta_im[:,c,:,:] = (delta_im[:,c,:,:].clone() - mean_arr[c]) / stddev_arr[c]

    # threshold each channel of each image in deltaIm according to inf norm
    # do on a per image basis as the inf norm of each image could be different
    bs = delta_im.size(0)
    for i in range(bs):
        # do per channel l_inf normalization
        for ci in range(3):
            l_inf_channel = delta_im[i,ci,:,:].detach().abs().max()
            mag_in_scaled_c = mag_in/(255.0*stddev_arr[ci])
            delta_im[i,ci,:,:] = delta_im[i,ci,:,:].clone() * np.minimum(1.0, mag_in_scaled_c / l_inf_channel.cpu().numpy())

    return delta_im


def train(netG, pretrained_clf, training_data_loader, optimizerG, criterion_pre, target=-1):
    netG.train()
    for itr, (image, _) in enumerate(training_data_loader, 1):
        if target == -1:
            # least likely class in nontargeted case
            pretrained_label_float = pretrained_clf(image.to(device))
            _, target_label = torch.min(pretrained_label_float, 1)

        image = image.to(device)

        delta_im = netG(image)
        delta_im = normalize_and_scale(delta_im, 'train')

        netG.zero_grad()

        recons = torch.add(image.to(device), delta_im.to(device))

        # do clamping per channel
        for cii in range(3):
            recons[:,cii,:,:] = recons[:,cii,:,:].clone().clamp(image[:,cii,:,:].min(), image[:,cii,:,:].max())

        output_pretrained = pretrained_clf(recons.to(device))

        # attempt to get closer to least likely class, or target
        loss = torch.log(criterion_pre(output_pretrained, target_label))

        loss.backward()
        optimizerG.step()
        print("itr {} loss {:.5f}".format(itr, loss.item()))


if __name__ == "__main__":
    netG = ResnetGenerator()
    pretrained_clf = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 5))
    for param in pretrained_clf.parameters():
        param.requires_grad = False
    optimizerG = optim.Adam(netG.parameters(), lr=1e-2)
    training_data_loader = [(torch.randn(2, 3, 8, 8), None) for _ in range(4)]
    train(netG, pretrained_clf, training_data_loader, optimizerG, nn.CrossEntropyLoss())
