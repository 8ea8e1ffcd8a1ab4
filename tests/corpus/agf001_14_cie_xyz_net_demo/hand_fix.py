"""
 CIE XYZ Net demo (single image), minimized: a small stand-in network and a generated image.
"""

import argparse
import logging

import numpy as np
import torch
import torch.nn as nn


class CIEXYZNet(nn.Module):
    def __init__(self, device='cuda'):
        super(CIEXYZNet, self).__init__()
        self.device = device
        self.srgb2xyz_net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1))
        self.xyz2srgb_net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1))

    def forward_srgb2xyz(self, x):
        return x + self.srgb2xyz_net(x)

    def forward_xyz2srgb(self, x):
        return x + self.xyz2srgb_net(x)

    def forward(self, x):
        xyz = self.forward_srgb2xyz(x)
        return xyz, self.forward_xyz2srgb(xyz)


class utils:
    @staticmethod
    def outOfGamutClipping(I):
        """ Clips out-of-gamut pixels. """
        I[I > 1] = 1  # any pixel is higher than 1, clip it to 1
        I[I < 0] = 0  # any pixel is below 0, clip it to 0
        return I

    @staticmethod
    def from_tensor_to_image(tensor, device='cuda'):
        """ converts tensor to image """
        tensor = torch.squeeze(tensor, dim=0)
        if device == 'cpu':
            image = tensor.data.numpy()
        else:
            image = tensor.cpu().data.numpy()
        # CHW to HWC
        image = image.transpose((1, 2, 0))
        return image

    @staticmethod
    def from_image_to_tensor(image):
        image = np.array(image)
        assert len(image.shape) == 3, 'Input image should be 3 channels colored images'
        # HWC to CHW
        image = image.transpose((2, 0, 1))
        return torch.unsqueeze(torch.from_numpy(image), dim=0)


def get_args():
    parser = argparse.ArgumentParser(description='Converting from sRGB to CIE XYZ and back.')
    parser.add_argument('--task', '-t', default='srgb-2-xyz-2-srgb',
                        help="Specify the required task: 'srgb-2-xyz-2-srgb', 'srgb-2-xyz', or 'xyz-2-srgb'.",
                        dest='task')
    parser.add_argument('--device', '-d', default='cpu',
                        help="Device: cuda or cpu.", dest='device')

    return parser.parse_args()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format='%(levelname)s: %(message)s')
    args = get_args()
    device = torch.device(args.device)
    task = args.task

    ciexyzNet = CIEXYZNet(device=device)
    ciexyzNet.to(device=device)
    ciexyzNet.eval()

    in_img = np.random.rand(16, 16, 3)

    in_img_tensor = utils.from_image_to_tensor(in_img).to(device=device, dtype=torch.float32)

    if task.lower() == 'srgb-2-xyz-2-srgb':
        with torch.no_grad():
            output_XYZ, output_sRGB = ciexyzNet(in_img_tensor)
        output_XYZ = utils.from_tensor_to_image(output_XYZ, device=device)
        output_sRGB = utils.from_tensor_to_image(output_sRGB, device=device)
        output_XYZ = utils.outOfGamutClipping(output_XYZ)
        output_sRGB = utils.outOfGamutClipping(output_sRGB)
        print("XYZ mean %.4f sRGB mean %.4f" % (output_XYZ.mean(), output_sRGB.mean()))

    elif task.lower() == 'srgb-2-xyz':
        with torch.no_grad():
            output_XYZ = ciexyzNet.forward_srgb2xyz(in_img_tensor)
        output_XYZ = utils.from_tensor_to_image(output_XYZ, device=device)
        output_XYZ = utils.outOfGamutClipping(output_XYZ)
        print("XYZ mean %.4f" % output_XYZ.mean())

    else:
        with torch.no_grad():
            output_sRGB = ciexyzNet.forward_xyz2srgb(in_img_tensor)
        output_sRGB = utils.from_tensor_to_image(output_sRGB, device=device)
        output_sRGB = utils.outOfGamutClipping(output_sRGB)
        print("sRGB mean %.4f" % output_sRGB.mean())
